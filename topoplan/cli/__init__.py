"""The ``topoplan`` command line: the Typer application (:mod:`.main`) and one module per command
(:mod:`.commands`)."""
