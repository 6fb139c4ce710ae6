import sys

from topoplan.cli.main import main

sys.exit(main())
