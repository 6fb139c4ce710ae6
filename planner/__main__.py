import sys

from planner.cli.main import main

sys.exit(main())
