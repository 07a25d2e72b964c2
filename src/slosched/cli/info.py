"""``slosched policies | schema`` and ``--version``: what is installed, for people and for editors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from slosched.cli.common import JsonOpt, out, output_file
from slosched.core.errors import ConfigError

if TYPE_CHECKING:
    from slosched.policies.catalog import PolicyEntry

_TITLES = {
    "routers": "routers",
    "engine_presets": "engine presets",
    "orderings": "engine orderings",
    "admissions": "engine admissions",
    "batchings": "engine batchings",
    "job_policies": "job policies",
    "filters": "pipeline filters",
    "scorers": "pipeline scorers",
    "pickers": "pipeline pickers",
    "stacks": "stacks",
}


def policies(as_json: JsonOpt = False) -> None:
    """List routers, engine presets and parts, job policies, the pipeline's stages and stacks, with each
    parameter's type, default and doc and each policy's aliases (built-in and from installed packages'
    ``slosched.policies`` entry points)."""
    from slosched.policies.catalog import catalog

    sections = catalog()
    if as_json:
        payload = {section: [_entry_json(entry) for entry in entries] for section, entries in sections.items()}
        print(json.dumps(payload, sort_keys=True))
        return
    for section, entries in sections.items():
        out.print(f"[bold]{_TITLES[section]}[/bold]")
        for entry in entries:
            aliases = f"  [dim](alias: {', '.join(entry.aliases)})[/dim]" if entry.aliases else ""
            out.print(f"  {entry.name}{aliases}", highlight=False)
            for info in entry.params:
                default = json.dumps(_jsonable(info.default))
                line = f"      {info.name}: {escape(info.type)} = {escape(default)}  [dim]{escape(info.doc)}[/dim]"
                out.print(line, highlight=False)
    out.print("an engine is a preset or ORDERING/ADMISSION/BATCHING, e.g. round-robin+urgency/always/chunked")
    out.print("parameters go under policy_params.{router,engine,job,stack}.NAME in a scenario; aliases are old names")


def _entry_json(entry: PolicyEntry) -> dict[str, object]:
    params = [
        {"name": info.name, "type": info.type, "default": _jsonable(info.default), "doc": info.doc}
        for info in entry.params
    ]
    return {"name": entry.name, "aliases": list(entry.aliases), "params": params}


def _jsonable(value: object) -> object:
    if isinstance(value, tuple | list):
        return [_jsonable(item) for item in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


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
