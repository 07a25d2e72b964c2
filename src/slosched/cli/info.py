"""``slosched policies | schema`` and ``--version``: what is installed, for people and for editors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from slosched.cli.common import JsonOpt, out, output_file
from slosched.core.errors import ConfigError

_TITLES = {
    "routers": "routers",
    "engine_presets": "engine presets",
    "orderings": "engine orderings",
    "admissions": "engine admissions",
    "batchings": "engine batchings",
    "job_policies": "job policies",
    "stacks": "stacks",
}


def policies(as_json: JsonOpt = False) -> None:
    """List routers, engine presets and parts, job policies and stacks with their parameter names
    (built-in and from installed packages' ``slosched.policies`` entry points)."""
    from slosched.policies.catalog import catalog

    sections = catalog()
    if as_json:
        payload = {
            section: [{"name": entry.name, "params": _params_json(entry.params)} for entry in entries]
            for section, entries in sections.items()
        }
        print(json.dumps(payload, sort_keys=True))
        return
    for section, entries in sections.items():
        out.print(f"[bold]{_TITLES[section]}[/bold]")
        for entry in entries:
            params = "?" if entry.params is None else (", ".join(entry.params) or "-")
            out.print(f"  {entry.name}  [dim]params: {params}[/dim]", highlight=False)
    out.print("an engine is a preset or ORDERING/ADMISSION/BATCHING, e.g. round-robin+urgency/always/chunked")
    out.print("parameters go under policy_params.{router,engine,job,stack}.NAME in a scenario")


def _params_json(params: tuple[str, ...] | None) -> list[dict[str, object]] | None:
    # Defaults live inside each factory and are not exposed by the registries, so only names are listed.
    return None if params is None else [{"name": name} for name in params]


def schema(
    out_path: Annotated[Path | None, typer.Option("--out", help="write the schema here instead of stdout")] = None,
) -> None:
    """Print the JSON Schema of scenario files (for editor completion, e.g. yaml-language-server)."""
    from slosched.scenario.schema import schema_text

    text = schema_text()
    if out_path is None:
        print(text, end="")
        return
    output_file(out_path, "--out")
    try:
        out_path.write_text(text)
    except OSError as error:
        raise ConfigError("--out", f"cannot write {out_path}: {error.strerror or error}") from None
    out.print(f"wrote {out_path}")


def version_callback(value: bool) -> None:
    if value:
        from slosched import __version__

        print(f"slosched {__version__}")
        raise typer.Exit()
