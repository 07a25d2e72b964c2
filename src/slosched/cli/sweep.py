"""``slosched sweep``: SLO capacity over policies x instance mixes x workloads, and fleet sizing."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from slosched.cli.common import SetOpt, error_line, output_dir
from slosched.cli.simulate import load
from slosched.cli.sweep_tables import out as _out
from slosched.cli.sweep_tables import print_capacity, print_search, print_sizing
from slosched.core.errors import ConfigError, Interrupted
from slosched.evaluation.judgement import JUDGEMENT_NAME
from slosched.evaluation.sizing import WORK_TOLERANCE
from slosched.planning.fleet import search_fleet
from slosched.planning.fleet_rows import FleetSearch
from slosched.planning.output import sweep_json, write_outputs
from slosched.planning.prices import Prices
from slosched.planning.sizing import SizingRow, size, sizing_warnings
from slosched.planning.sweep import Mix, SweepRow, SweepSettings, Workload, sweep, sweep_warnings
from slosched.planning.workload import with_model
from slosched.scenario.config import Scenario

QUICK = SweepSettings(seeds=(0, 1), num_jobs=120, precision=0.05, jobs_per_slot=4.0)
FULL = SweepSettings(seeds=(0, 1, 2, 3, 4), num_jobs=400, precision=0.02, work_tolerance=WORK_TOLERANCE)

SearchOpt = Annotated[
    bool, typer.Option("--search", help="the cheapest fleet (GPU x TP x count) carrying --rate at --target")
]
ModelOpt = Annotated[
    str | None, typer.Option("--model", help="serve this model: a catalog name, a config.json or a model dir")
]
MixesOpt = Annotated[
    bool, typer.Option("--mixes/--no-mixes", help="--search: also fleets of two GPU types (default: yes)")
]
PriceOpt = Annotated[
    list[str] | None, typer.Option("--price", help="USD per GPU-hour over the list price: GPU=USD (repeatable)")
]


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
    search: SearchOpt = False,
    rate: Annotated[float | None, typer.Option(help="jobs/s the sized or searched fleet must carry")] = None,
    target: Annotated[float, typer.Option(help="share of jobs that must meet their SLO")] = 0.90,
    model: ModelOpt = None,
    gpus: Annotated[
        str | None, typer.Option(help="--search: comma-separated GPUs (default: those with fitted efficiencies)")
    ] = None,
    tp: Annotated[str | None, typer.Option("--tp", help="--search: comma-separated TPs (default: fit, 2x fit)")] = None,
    measure: Annotated[
        int | None, typer.Option(help="--search: SLO capacity of this many cheapest fleets found (3; --quick 1)")
    ] = None,
    mixes_of_two: MixesOpt = True,
    price: PriceOpt = None,
    seeds: Annotated[int | None, typer.Option(help="seeds per figure (default 5; --quick 2)")] = None,
    jobs: Annotated[int | None, typer.Option(help="measured jobs per run (default 400; --quick 120)")] = None,
    workers: Annotated[int, typer.Option(help="local worker processes")] = 2,
    ray: Annotated[str | None, typer.Option("--ray", help="run on a Ray cluster: ADDRESS, or 'local'")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="write sweep.json, sweep.csv and sweep.html here")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="2 seeds, 120 jobs per run, 5% precision")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object as the last line")] = False,
    sets: SetOpt = None,
) -> None:
    """How many jobs/s can this cluster take at 90% SLO attainment, per policy and instance mix (and at what
    hourly cost); with --size and --rate, how many instances of a GPU group carry a rate; with --search and
    --rate, the cheapest fleet of any GPU type, TP and count that carries it."""
    settings = _settings(quick, seeds, jobs, workers, ray, target)
    if out is not None:  # before the sweep runs, not after it: created now, and a file written and removed
        output_dir(out, "--out")
    loaded = [Workload(path.stem, _scenario(path, sets, model)) for path in scenarios]
    mixes = [Mix.parse(text) for text in mix or ()]
    names = _policies(policies)
    _check_modes(search, rate, size_groups, names)
    first = loaded[0].scenario
    prices = Prices.of(first.prices, price or ())
    kinds = (_names(gpus, "--gpus"), _tps(tp), mixes_of_two)
    started = time.perf_counter()
    found = _search(first, names, (rate or 0.0, target), settings, prices, kinds, measure, quick) if search else None
    rows, sizing, stopped = _compute(loaded, mixes, names, settings, size_groups or [], rate, target, prices, search)
    warnings = _warnings(first, rows, sizing, found, rate or 0.0, settings)
    meta = _meta(loaded, settings, target, time.perf_counter() - started, warnings, stopped is not None)
    _report(sweep_json(rows, sizing, meta), found, rows, sizing, target, out, as_json)
    if stopped is not None:  # exit 130, after writing what finished
        error_line(
            f"interrupted: {len(rows) + len(sizing)} rows finished; the figures shown are theirs, marked partial"
        )
        raise stopped


def _warnings(
    scenario: Scenario,
    rows: list[SweepRow],
    sizing: list[SizingRow],
    found: FleetSearch | None,
    rate: float,
    settings: SweepSettings,
) -> list[str]:
    """What made some figure less than the method promises, each line once, also printed on stderr."""
    warnings = sweep_warnings(rows)
    if sizing:
        warnings += sizing_warnings(scenario, sizing, rate, settings)
    if found is not None:
        warnings += found.warnings
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    return warnings


def _report(
    document: dict[str, Any],
    found: FleetSearch | None,
    rows: list[SweepRow],
    sizing: list[SizingRow],
    target: float,
    out: Path | None,
    as_json: bool,
) -> None:
    """The tables, the files under ``--out`` and the ``--json`` line."""
    if found is not None:
        document["search"] = found.as_json()
        print_search(found)
    if rows:
        print_capacity(rows, target)
    if sizing:
        print_sizing(sizing, target)
    if out is not None:
        write_outputs(out, document, rows, sizing)
        _out.print(f"wrote {out / 'sweep.json'}, {out / 'sweep.csv'}, {out / 'sweep.html'}")
    if as_json:
        from slosched.metrics.summary import json_safe

        print(json.dumps(json_safe(document), allow_nan=False))


def _search(
    scenario: Scenario,
    names: list[str] | None,
    rate_target: tuple[float, float],
    settings: SweepSettings,
    prices: Prices,
    kinds: tuple[list[str] | None, list[int] | None, bool],
    measure: int | None,
    quick: bool,
) -> FleetSearch:
    """The cheapest fleet for ``rate``, sized for the policy it will run: the stack unless --policies names
    another (a scenario's first policy is only the first row of its comparison). --quick measures only the
    answer's capacity: the runner-up fleets' are context, and each costs as much as a type's count search."""
    policy = names[0] if names else "slosched"
    fleets = measure if measure is not None else (1 if quick else 3)
    rate, target = rate_target
    gpus, tps, mixes = kinds
    return search_fleet(scenario, rate, target, policy, settings, prices, gpus, tps, fleets, mixes)


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
        "judgement": JUDGEMENT_NAME,  # how each run's attainment was judged (``evaluation/judgement.py``)
    }


def _compute(
    loaded: list[Workload],
    mixes: list[Mix],
    names: list[str] | None,
    settings: SweepSettings,
    size_groups: list[str],
    rate: float | None,
    target: float,
    prices: Prices,
    search: bool,
) -> tuple[list[SweepRow], list[SizingRow], Interrupted | None]:
    """(sweep rows, sizing rows, the interruption when Ctrl-C stopped it: the rows then are those that
    finished); neither with ``search`` (the fleet search is its own table)."""
    try:
        if search:
            return [], [], None
        if size_groups:
            return [], size(loaded[0].scenario, size_groups, names, rate or 0.0, target, settings, prices), None
        return sweep(loaded, mixes, names, settings, prices), [], None
    except Interrupted as stop:
        finished = list(stop.partial or [])
        return ([], finished, stop) if size_groups else (finished, [], stop)


def _scenario(path: Path, sets: list[str] | None, model: str | None) -> Scenario:
    scenario = load(path, sets)
    return scenario if model is None else with_model(scenario, model)


def _policies(text: str | None) -> list[str] | None:
    if not text:
        return None
    from slosched.sim.runner import PolicyPair

    names = [part.strip() for part in text.split(",")]
    for name in names:
        PolicyPair.parse(name)
    return names


def _check_modes(search: bool, rate: float | None, size_groups: list[str] | None, names: list[str] | None) -> None:
    if search and size_groups:
        raise ConfigError("--search", "give --search or --size, not both")
    if search and rate is None:
        raise ConfigError("--search", "give --search together with --rate R (jobs/s)")
    if search and names is not None and len(names) != 1:
        raise ConfigError("--policies", f"--search takes one policy, got {len(names)}")
    if not search and (rate is None) != (not size_groups):
        raise ConfigError("--size", "give --size GROUP together with --rate R (jobs/s)")


def _names(text: str | None, flag: str) -> list[str] | None:
    if text is None:
        return None
    from slosched.perf.hardware import canonical_gpu

    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise ConfigError(flag, f"expected comma-separated GPU names, got {text[:64]!r}")
    return list(dict.fromkeys(canonical_gpu(name) for name in names))


def _tps(text: str | None) -> list[int] | None:
    if text is None:
        return None
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or not all(part.isdigit() and int(part) >= 1 for part in parts):
        raise ConfigError("--tp", f"expected comma-separated positive integers such as 1,2,4, got {text[:64]!r}")
    return sorted({int(part) for part in parts})


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
        work_tolerance=base.work_tolerance,
    )
