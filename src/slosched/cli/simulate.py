"""``slosched simulate | compare | demo``: run policy pairs on a scenario, print the table, write a report.

Inputs and outputs are checked before the first simulated step (``cli.common``), so a bad ``--report``
folder or ``--trace`` file is one ``error:`` line, not a traceback after minutes of simulation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from slosched.cli.common import (
    JsonOpt,
    ReportOpt,
    ScenarioArg,
    SetOpt,
    TraceOpt,
    err,
    error_line,
    input_file,
    out,
    output_dir,
)
from slosched.core.errors import ConfigError, Interrupted
from slosched.core.records import RunResult
from slosched.scenario.config import Scenario, load_scenario
from slosched.sim.runner import PolicyPair

if TYPE_CHECKING:
    from slosched.evaluation.workbench import Workbench


def load(path: Path, sets: Sequence[str] | None) -> Scenario:
    """The scenario file at ``path`` (checked) with ``--set`` overrides applied."""
    return load_scenario(input_file(path, "scenario"), sets or ())


SeedOpt = Annotated[
    int, typer.Option("--seed", help="run seed, as `sweep`'s seeds 0..N-1: the jobs, the warm-up and the noise")
]


def _bench(scenario: Scenario, trace: Path | None, base_dir: Path) -> Workbench:
    """The scenario as runs, built the one way ``sweep`` builds them too (``planning/workload.py``): the
    same jobs for the same seed, the same warm-up prefix, the same history for the deadlines."""
    from slosched.planning.workload import scenario_workbench

    return scenario_workbench(scenario, None if trace is None else str(trace), str(base_dir))


def _run(
    scenario: Scenario, pairs: Sequence[PolicyPair], bench: Workbench, seed: int, rate: float
) -> dict[str, RunResult]:
    """Every pair on the bench's jobs at ``rate``; results hold the measured jobs only (no warm-up)."""
    from slosched.evaluation.workbench import measured_only
    from slosched.experiment import compare_policies

    jobs, history = bench.workload(rate, seed)
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True
    ) as progress:
        task = progress.add_task("simulating", total=len(pairs))

        def on_start(name: str) -> None:
            progress.update(task, description=f"simulating {name} ({len(jobs)} jobs)", advance=0)

        try:
            results = compare_policies(scenario, pairs, jobs=jobs, on_start=on_start, history=history, seed=seed)
        except Interrupted as stop:  # the pairs that finished, measured as the others would have been
            raise Interrupted({name: measured_only(result) for name, result in (stop.partial or {}).items()}) from None
        progress.update(task, completed=len(pairs))
    return {name: measured_only(result) for name, result in results.items()}


def _multiples(text: str | None) -> list[float]:
    """``--loads 0.5,1,1.5,2``: multiples of the scenario's arrival rate, each > 0."""
    if text is None:
        return []
    values = []
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        try:
            value = float(part)
        except ValueError:
            raise ConfigError("--loads", f"expected numbers > 0 separated by commas, got {part[:64]!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise ConfigError("--loads", f"expected numbers > 0, got {part[:64]!r}")
        values.append(value)
    return sorted(set(values))


def _by_load(
    scenario: Scenario,
    pairs: Sequence[PolicyPair],
    bench: Workbench,
    seed: int,
    rate: float,
    multiples: Sequence[float],
) -> dict[float, dict[str, RunResult]]:
    """Every pair at each multiple of the offered rate, on the same jobs with arrivals rescaled (common random
    numbers: attainment then falls with the load for a reason, not by the luck of a new sample)."""
    by_load: dict[float, dict[str, RunResult]] = {}
    for multiple in multiples:
        err.print(f"load x{multiple:g} ({rate * multiple:.3g} jobs/s)")
        by_load[rate * multiple] = _run(scenario, pairs, bench, seed, rate * multiple)
    return by_load


def _emit(
    results: dict[str, RunResult],
    scenario: Scenario,
    as_json: bool,
    report: Path | None,
    by_load: dict[float, dict[str, RunResult]] | None = None,
    run: dict[str, object] | None = None,
    partial: bool = False,
) -> None:
    from slosched.metrics.summary import summarize
    from slosched.metrics.table import print_serving_table, print_table

    summaries = {name: summarize(result) for name, result in results.items()}
    title = f"{scenario.name}: {len(next(iter(results.values())).jobs)} jobs"
    print_table(summaries, title=title + (" (partial: interrupted)" if partial else ""), console=out)
    print_serving_table(summaries, title="serving benchmark terms (vLLM's bench serve)", console=out)
    if report is not None:
        from slosched.metrics.report import write_report

        description = f"PARTIAL (interrupted): {scenario.description}" if partial else scenario.description
        path = write_report(report, results, scenario.name, description, by_load=by_load)
        out.print(f"report: {path}")
    if as_json:
        from slosched.evaluation.workbench import measure
        from slosched.metrics.summary import json_safe

        payload: dict[str, object] = {"policies": {name: summary.to_json_dict() for name, summary in summaries.items()}}
        for name, result in results.items():
            figures = measure(result, 0.0, result.seed)
            payload["policies"][name]["attainment_second_half"] = figures.attainment_second_half  # type: ignore[index]
            # What a capacity search compares with its target (the second half up to its sampling error).
            payload["policies"][name]["attainment_judged"] = figures.judged  # type: ignore[index]
        payload.update(run or {})
        print(json.dumps(json_safe(payload), allow_nan=False))


def _checked(trace: Path | None, report: Path | None) -> None:
    if trace is not None:
        input_file(trace, "--trace")
    if report is not None:
        output_dir(report, "--report")


def simulate(
    scenario_path: ScenarioArg,
    policy: Annotated[str | None, typer.Option(help="ROUTER+ENGINE; default: the scenario's first")] = None,
    trace: TraceOpt = None,
    as_json: JsonOpt = False,
    report: ReportOpt = None,
    sets: SetOpt = None,
    seed: SeedOpt = 0,
) -> None:
    """Simulate one policy pair on a scenario."""
    scenario = load(scenario_path, sets)
    pair = PolicyPair.parse(policy) if policy else scenario.policy_pairs()[0]
    _checked(trace, report)
    bench = _bench(scenario, trace, scenario_path.parent)
    _run_and_emit(scenario, [pair], bench, seed, as_json, report)


def compare(
    scenario_path: ScenarioArg,
    policies: Annotated[str | None, typer.Option(help="comma-separated ROUTER+ENGINE pairs")] = None,
    trace: TraceOpt = None,
    as_json: JsonOpt = False,
    report: ReportOpt = None,
    sets: SetOpt = None,
    loads: Annotated[
        str | None,
        typer.Option(
            help="also run at these multiples of the offered rate (e.g. 0.5,1,1.5,2): the report plots "
            "attainment and goodput vs load"
        ),
    ] = None,
    seed: SeedOpt = 0,
) -> None:
    """Compare policy pairs on identical arrivals and seed: the scenario's ``num_jobs`` measured jobs at its
    arrival rate after a discarded warm-up prefix, built as ``sweep`` builds its runs."""
    scenario = load(scenario_path, sets)
    pairs = [PolicyPair.parse(text) for text in policies.split(",")] if policies else scenario.policy_pairs()
    multiples = _multiples(loads)
    _checked(trace, report)
    bench = _bench(scenario, trace, scenario_path.parent)
    _run_and_emit(scenario, pairs, bench, seed, as_json, report, multiples)


def _run_and_emit(
    scenario: Scenario,
    pairs: Sequence[PolicyPair],
    bench: Workbench,
    seed: int,
    as_json: bool,
    report: Path | None,
    multiples: Sequence[float] = (),
) -> None:
    """Run the pairs (and the load multiples), then print and write; on Ctrl-C print and write what
    finished, flagged partial, then stop (exit 130)."""
    rate = _rate(bench)
    info = _run_info(bench, seed, rate)
    results: dict[str, RunResult] = {}
    try:
        results = _run(scenario, pairs, bench, seed, rate)
        by_load = _by_load(scenario, pairs, bench, seed, rate, multiples) if multiples else None
    except Interrupted as stop:
        finished = results or stop.partial or {}  # the load multiples only add to finished base runs
        if finished:
            _emit(finished, scenario, as_json, report, None, {**info, "partial": True}, partial=True)
        shown = "; the figures above (and the report) are theirs, marked partial" if finished else ""
        error_line(f"interrupted: {len(finished)} of {len(pairs)} policy runs finished{shown}")
        raise
    _emit(results, scenario, as_json, report, by_load, info)


def _rate(bench: Workbench) -> float:
    from slosched.planning.workload import ScenarioJobs

    return bench.jobs.rate() if isinstance(bench.jobs, ScenarioJobs) else 1.0


def _run_info(bench: Workbench, seed: int, rate: float) -> dict[str, object]:
    """How the run was built, in the JSON: enough to rebuild it in ``sweep``'s terms."""
    return {"seed": seed, "rate": rate, "num_jobs": bench.num_jobs, "num_warmup_jobs": bench.warmup_count(rate, seed)}


def demo(
    report: Annotated[Path, typer.Option(help="report folder")] = Path("reports/demo"),
    as_json: JsonOpt = False,
    sets: SetOpt = None,
) -> None:
    """The bundled scenario: 2x A100 + 2x A6000 serving a chat + code mix, several policy pairs."""
    from slosched.bench.demo import demo_scenario_path

    path = demo_scenario_path()
    scenario = load(path, sets)
    _checked(None, report)
    bench = _bench(scenario, None, path.parent)
    _run_and_emit(scenario, scenario.policy_pairs(), bench, 0, as_json, report)
