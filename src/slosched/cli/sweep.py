"""``slosched sweep``: SLO capacity over policies x instance mixes x workloads, and fleet sizing."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from slosched.cli.common import SetOpt, error_line, output_dir
from slosched.cli.simulate import load
from slosched.core.errors import ConfigError, Interrupted
from slosched.planning.output import sweep_json, write_outputs
from slosched.planning.sizing import SizingRow, size, sizing_warnings
from slosched.planning.sweep import Mix, SweepRow, SweepSettings, Workload, sweep, sweep_warnings

_out = Console(width=None if sys.stdout.isatty() else 140)

QUICK = SweepSettings(seeds=(0, 1), num_jobs=120, precision=0.05, jobs_per_slot=4.0)
FULL = SweepSettings(seeds=(0, 1, 2, 3, 4), num_jobs=400, precision=0.02)


def sweep_command(
    scenarios: Annotated[list[Path], typer.Argument(help="scenario YAML file(s): one workload each")],
    policies: Annotated[str | None, typer.Option(help="comma-separated policies (default: each scenario's)")] = None,
    mix: Annotated[
        list[str] | None,
        typer.Option("--mix", help="instance mix [LABEL=]GROUP:COUNT[,...] of the scenario's groups (repeatable)"),
    ] = None,
    size_groups: Annotated[
        list[str] | None, typer.Option("--size", help="instance group to size for --rate (repeatable)")
    ] = None,
    rate: Annotated[float | None, typer.Option(help="jobs/s the sized fleet must carry")] = None,
    target: Annotated[float, typer.Option(help="share of jobs that must meet their SLO")] = 0.90,
    seeds: Annotated[int | None, typer.Option(help="seeds per figure (default 5; --quick 2)")] = None,
    jobs: Annotated[int | None, typer.Option(help="measured jobs per run (default 400; --quick 120)")] = None,
    workers: Annotated[int, typer.Option(help="local worker processes")] = 2,
    ray: Annotated[str | None, typer.Option("--ray", help="run on a Ray cluster: ADDRESS, or 'local'")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="write sweep.json, sweep.csv and sweep.html here")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="2 seeds, 120 jobs per run, 5% precision")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object as the last line")] = False,
    sets: SetOpt = None,
) -> None:
    """How many jobs/s can this cluster take at 90% SLO attainment, per policy and instance mix; with
    --size and --rate, how many instances of a GPU group (and at what hourly cost) carry a rate."""
    settings = _settings(quick, seeds, jobs, workers, ray, target)
    if out is not None:  # before the sweep runs, not after it: created now, and a file written and removed
        output_dir(out, "--out")
    loaded = [Workload(path.stem, load(path, sets)) for path in scenarios]
    mixes = [Mix.parse(text) for text in mix or ()]
    names = [text.strip() for text in policies.split(",")] if policies else None
    if names is not None:
        from slosched.sim.runner import PolicyPair

        for name in names:
            PolicyPair.parse(name)
    if (rate is None) != (not size_groups):
        raise ConfigError("--size", "give --size GROUP together with --rate R (jobs/s)")
    started = time.perf_counter()
    rows, sizing, stopped = _compute(loaded, mixes, names, settings, size_groups or [], rate, target)
    warnings = sweep_warnings(rows)
    if sizing:
        warnings += sizing_warnings(loaded[0].scenario, sizing, rate or 0.0, settings)
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    meta = _meta(loaded, settings, target, time.perf_counter() - started, warnings, stopped is not None)
    document = sweep_json(rows, sizing, meta)
    _print(rows, sizing, target)
    if out is not None:
        write_outputs(out, document, rows, sizing)
        _out.print(f"wrote {out / 'sweep.json'}, {out / 'sweep.csv'}, {out / 'sweep.html'}")
    if as_json:
        from slosched.metrics.summary import json_safe

        print(json.dumps(json_safe(document), allow_nan=False))
    if stopped is not None:  # exit 130, after writing what finished
        error_line(
            f"interrupted: {len(rows) + len(sizing)} rows finished; the figures shown are theirs, marked partial"
        )
        raise stopped


def _meta(
    loaded: list[Workload], settings: SweepSettings, target: float, wall_s: float, warnings: list[str], partial: bool
) -> dict[str, object]:
    """The document's run facts; an interrupted sweep says so in its title and ``partial``."""
    title = f"slosched sweep: {', '.join(w.label for w in loaded)}"
    return {
        "title": f"{title} (partial: interrupted)" if partial else title,
        "partial": partial,
        "target": target,
        "seeds": list(settings.seeds),
        "wall_s": wall_s,
        "warnings": warnings,
    }


def _compute(
    loaded: list[Workload],
    mixes: list[Mix],
    names: list[str] | None,
    settings: SweepSettings,
    size_groups: list[str],
    rate: float | None,
    target: float,
) -> tuple[list[SweepRow], list[SizingRow], Interrupted | None]:
    """(sweep rows, sizing rows, the interruption when Ctrl-C stopped it: the rows then are those that
    finished)."""
    try:
        if size_groups:
            return [], size(loaded[0].scenario, size_groups, names, rate or 0.0, target, settings), None
        return sweep(loaded, mixes, names, settings), [], None
    except Interrupted as stop:
        finished = list(stop.partial or [])
        return ([], finished, stop) if size_groups else (finished, [], stop)


def _settings(
    quick: bool, seeds: int | None, jobs: int | None, workers: int, ray: str | None, target: float
) -> SweepSettings:
    base = QUICK if quick else FULL
    if seeds is not None and seeds < 1:
        raise ConfigError("--seeds", f"must be >= 1, got {seeds}")
    if jobs is not None and jobs < 10:
        raise ConfigError("--jobs", f"must be >= 10, got {jobs}")
    if not 0 < target <= 1:
        raise ConfigError("--target", f"must be in (0, 1], got {target}")
    if workers < 1:
        raise ConfigError("--workers", f"must be >= 1, got {workers}")
    if ray is not None:  # before any work: an unreachable cluster is an error now, not minutes of retries
        from slosched.tuning.executors import check_ray_address

        check_ray_address(ray, "--ray")
    return SweepSettings(
        seeds=tuple(range(seeds)) if seeds is not None else base.seeds,
        num_jobs=jobs if jobs is not None else base.num_jobs,
        precision=base.precision,
        targets=tuple(sorted({0.90, 0.95, target})),
        workers=workers,
        ray_address=ray,
        jobs_per_slot=base.jobs_per_slot,
    )


def _print(rows: list[SweepRow], sizing: list[SizingRow], target: float) -> None:
    if rows:
        table = Table(title=f"SLO capacity (jobs/s at which >= {target:.0%} of jobs meet their SLO)")
        for column in ("workload", "mix", "policy", "90%", "95%"):
            table.add_column(column, justify="left" if column in ("workload", "mix", "policy") else "right")
        for row in rows:
            figures = (row.capacity[0.90].text(), row.capacity[0.95].text())
            table.add_row(row.workload, row.mix, row.policy, *figures)
        _out.print(table)
    if sizing:
        table = Table(title=f"Smallest fleet carrying the rate at {target:.0%}")
        for column in ("policy", "group", "gpu", "instances", "$/hour"):
            table.add_column(column)
        for item in sizing:
            count = "> 256" if item.min_count is None else str(item.min_count)
            cost = "-" if item.cost_per_hour is None else f"{item.cost_per_hour:.2f}"
            table.add_row(item.policy, item.group, item.gpu, count, cost)
        _out.print(table)
