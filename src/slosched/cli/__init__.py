"""The ``slosched`` command line: ``main`` (the console script) and its typer ``app``; one module per group
of commands (``simulate``, ``sweep``, ``trace``, ``info``, ``profile``, ``native``), sharing ``common``."""

import os
import signal
import threading


def _interrupted_while_loading(signum: int, frame: object) -> None:
    # Ctrl-C before any command ran (importing takes seconds on a busy machine): nothing to write, no
    # traceback from deep inside an import.
    os.write(2, b"error: interrupted\n")
    os._exit(130)


# Only while the command modules load; the previous handler (Python's KeyboardInterrupt) is back after.
_main_thread = threading.current_thread() is threading.main_thread()
_previous = signal.signal(signal.SIGINT, _interrupted_while_loading) if _main_thread else None
try:
    from slosched.cli.main import main
finally:
    if _main_thread:
        signal.signal(signal.SIGINT, _previous)

__all__ = ["main"]
