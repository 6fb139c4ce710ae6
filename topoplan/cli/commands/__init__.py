"""CLI command groups; each module defines ``register(app)`` and is listed in :data:`topoplan.cli.main.COMMANDS`."""
