"""The ``slosched`` command line: ``main`` (the console script) and its typer ``app``; one module per group
of commands (``simulate``, ``sweep``, ``trace``, ``info``, ``profile``, ``native``), sharing ``common``."""

from slosched.cli.main import main

__all__ = ["main"]
