"""CLI command groups; each module defines ``register(app)`` and is listed in :data:`planner.cli.main.COMMANDS`."""
