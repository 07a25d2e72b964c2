"""``slosched native build | status``: the compiled simulator modules (see ``slosched.native``)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from slosched.cli.common import JsonOpt, out

native_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="markdown",  # as the main app's (cli/main.py)
    help="Compile the simulator's hot modules with mypyc (about x1.4 faster, same results) or show their state.",
)


@native_app.command("build")
def build_command(
    force: Annotated[bool, typer.Option("--force", help="rebuild even when a build for these sources exists")] = False,
    jobs: Annotated[
        int | None, typer.Option("--jobs", min=1, help="parallel C compilations (default: CPU count)")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Compile the hot modules for the current sources (about 30 s on 2 cores; skipped when up to date)."""
    from slosched.native.build import build

    with out.status("compiling the simulator's hot modules with mypyc"):
        directory = build(force=force, jobs=jobs)
    _report(as_json, f"built: {directory}")


@native_app.command("status")
def status_command(as_json: JsonOpt = False) -> None:
    """Whether the compiled modules are in use, and why not when they are not."""
    _report(as_json, None)


def _report(as_json: bool, headline: str | None) -> None:
    from slosched.native import native_status

    status = native_status(fresh=True)  # this process may have imported the sources before a build
    if as_json:
        print(json.dumps(status.as_json(), sort_keys=True))
        return
    if headline:
        out.print(headline, highlight=False)
    state = "[green]in use[/green]" if status.active else "[yellow]not in use[/yellow]"
    out.print(f"compiled simulator modules: {state} — {status.reason}", highlight=False)
