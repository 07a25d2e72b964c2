"""What the CLI's command modules share: consoles, option types, and checks of paths before any work.

Every check raises ``ConfigError`` naming the option, so ``cli.main`` prints one ``error:`` line and exits
2; they run before a simulation or a sweep starts, so a bad ``--report`` folder costs no simulated minutes.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from slosched.core.errors import ConfigError

err = Console(stderr=True)
# Piped output (CI logs, `| tee`) gets a width that fits the table instead of rich's 80 columns.
out = Console(width=None if sys.stdout.isatty() else 140)


def error_line(text: str) -> None:
    """``error: TEXT`` on stderr, one line per line of ``text`` (the CLI's one way to report a failure)."""
    from rich.markup import escape

    for line in text.splitlines() or [""]:
        err.print(f"[red]error:[/red] {escape(line)}", soft_wrap=True, highlight=False)


ScenarioArg = Annotated[Path, typer.Argument(help="scenario YAML file")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON object as the last line")]
TraceOpt = Annotated[Path | None, typer.Option("--trace", help="JSONL trace replacing the scenario's workload")]
ReportOpt = Annotated[Path | None, typer.Option("--report", help="write a report (markdown + plots) here")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="override a scenario key before validation: PATH=VALUE, VALUE as YAML "
        "(workload.num_jobs=200, 'policies=[least-tokens+fcfs]', cluster.instances.0.gpu=A100); repeatable",
    ),
]


def input_file(path: Path, option: str) -> Path:
    """``path`` if it is a readable file; else an error naming ``option``."""
    if not path.exists():
        raise ConfigError(option, f"file not found: {path}")
    if not path.is_file():
        raise ConfigError(option, f"{path} is a directory, not a file")
    if not os.access(path, os.R_OK):
        raise ConfigError(option, f"{path} is not readable")
    return path


def output_file(path: Path, option: str) -> Path:
    """``path`` if a file can be written there (its folder exists and is writable, it is no folder)."""
    if path.is_dir():
        raise ConfigError(option, f"{path} is a directory; give a file name")
    folder = path.parent
    if not folder.is_dir():
        raise ConfigError(option, f"folder {folder} does not exist")
    _probe_write(folder, option)
    return path


def output_dir(path: Path, option: str) -> Path:
    """``path`` as a writable folder, created (with its parents) when missing."""
    if path.exists() and not path.is_dir():
        raise ConfigError(option, f"{path} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(option, f"cannot create folder {path}: {error.strerror or error}") from None
    _probe_write(path, option)
    return path


def _probe_write(folder: Path, option: str) -> None:
    """Write and remove a temporary file: permission bits alone miss read-only mounts and root's view."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".slosched-probe-"):
            pass
    except OSError as error:
        raise ConfigError(option, f"cannot write in {folder}: {error.strerror or error}") from None
