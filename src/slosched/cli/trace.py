"""``slosched trace``: write a scenario's jobs as a JSONL trace (``dump``, the default) or convert a
user's trace (``import``), and ``slosched hardware``: list the GPUs and models the simulator knows.

``slosched trace SCENARIO --out FILE`` (the original command) still works: a first argument that is not a
subcommand name is read as ``dump``'s scenario.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from slosched.cli.common import ScenarioArg, SetOpt, input_file, out, output_file

HardwareOpt = Annotated[
    list[Path] | None,
    typer.Option("--hardware", help="user hardware YAML/JSON merged over the bundled GPUs/models (repeatable)"),
]


class _DumpByDefault(TyperGroup):
    """A group whose first argument, when not a subcommand, belongs to ``dump`` (backwards compatible)."""

    # typer vendors its own click; its Context type is private, typer.Context is its public subclass.
    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["dump", *args]
        return super().parse_args(ctx, args)


trace_app = typer.Typer(
    cls=_DumpByDefault,
    no_args_is_help=True,
    rich_markup_mode="markdown",  # as the main app's (cli/main.py)
    help="Write a scenario's jobs as a JSONL trace (dump) or convert a user's trace (import).",
)


def apply_hardware(files: list[Path] | None) -> None:
    """Make ``--hardware`` files active for this process (validated first; errors name file and field)."""
    if files:
        from slosched.perf.hardware import use_hardware

        use_hardware(files)


@trace_app.command("dump")
def dump(
    scenario_path: ScenarioArg,
    out_path: Annotated[Path, typer.Option("--out", help="JSONL file to write")],
    sets: SetOpt = None,
    hardware: HardwareOpt = None,
) -> None:
    """Write the scenario's generated jobs as a JSONL trace (for replay with --trace)."""
    from slosched.cli.simulate import load
    from slosched.workloads.trace_io import save_jobs

    apply_hardware(hardware)
    scenario = load(scenario_path, sets)
    output_file(out_path, "--out")
    jobs = scenario.jobs(scenario_path.parent)
    save_jobs(out_path, jobs)
    out.print(f"wrote {len(jobs)} jobs to {out_path}")


@trace_app.command("import")
def import_(
    path: Annotated[Path, typer.Argument(help="the trace file to convert")],
    fmt: Annotated[str, typer.Option("--format", help="azure, azure2024, burstgpt, mooncake, sharegpt or vidur")],
    out_path: Annotated[Path, typer.Option("--out", help="JSONL job trace to write")],
    limit: Annotated[int | None, typer.Option("--limit", help="read at most N rows (the first in the file)")] = None,
    rate_scale: Annotated[
        float, typer.Option("--rate-scale", help="divide arrival times by X (2 = twice the request rate)")
    ] = 1.0,
) -> None:
    """Convert a trace (see docs/traces.md) into slosched's JSONL jobs, replayable with --trace."""
    from slosched.workloads.importers import import_trace
    from slosched.workloads.trace_io import save_jobs

    input_file(path, "trace")
    output_file(out_path, "--out")
    result = import_trace(fmt, path, limit, rate_scale)
    save_jobs(out_path, result.jobs)
    span = result.jobs[-1].arrival_s if result.jobs else 0.0
    skipped = f"; skipped {result.skipped_zero} rows with 0 tokens" if result.skipped_zero else ""
    out.print(f"wrote {len(result.jobs)} jobs over {span:.1f} s to {out_path} ({result.rows_read} rows read{skipped})")


def hardware(hardware_files: HardwareOpt = None) -> None:
    """List the GPUs (memory, bandwidth, BF16 TFLOP/s, interconnect, price) and models the simulator knows."""
    from slosched.perf.hardware import active_hardware

    apply_hardware(hardware_files)
    catalog = active_hardware()
    for gpu in catalog.gpus.values():
        price = "?" if gpu.price_per_hour is None else f"${gpu.price_per_hour:.2f}/h"
        fields: list[Any] = [
            f"{gpu.memory_bytes / 1e9:g} GB",
            f"{gpu.bandwidth_Bps / 1e9:g} GB/s",
            f"{gpu.fp16_flops / 1e12:g} TFLOP/s",
            f"link {gpu.interconnect_Bps / 1e9:g} GB/s",
            price,
        ]
        out.print(f"gpu {gpu.name}: " + ", ".join(str(field) for field in fields))
    for model in catalog.models.values():
        out.print(f"model {model.name}: {model.params_b:g} B params, {model.layers} layers, hidden {model.hidden}")
    if catalog.files:
        out.print(f"user files: {os.pathsep.join(catalog.files)}")


def register(app: typer.Typer) -> None:
    """Add ``trace`` (sub-app) and ``hardware`` to the main app."""
    app.add_typer(trace_app, name="trace")
    app.command("hardware")(hardware)
