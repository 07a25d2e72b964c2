"""``slosched simulate | compare | demo``: run policy pairs on a scenario, print the table, write a report.

Inputs and outputs are checked before the first simulated step (``cli.common``), so a bad ``--report``
folder or ``--trace`` file is one ``error:`` line, not a traceback after minutes of simulation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from slosched.cli.common import (
    JsonOpt,
    ReportOpt,
    ScenarioArg,
    SetOpt,
    TraceOpt,
    err,
    input_file,
    out,
    output_dir,
)
from slosched.core.errors import ConfigError
from slosched.core.records import RunResult
from slosched.scenario.config import Scenario, load_scenario
from slosched.sim.runner import PolicyPair


def load(path: Path, sets: Sequence[str] | None) -> Scenario:
    """The scenario file at ``path`` (checked) with ``--set`` overrides applied."""
    return load_scenario(input_file(path, "scenario"), sets or ())


def _run(scenario: Scenario, pairs: Sequence[PolicyPair], trace: Path | None, base_dir: Path) -> dict[str, RunResult]:
    from slosched.experiment import compare_policies

    jobs = scenario.jobs(base_dir, trace)
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True
    ) as progress:
        task = progress.add_task("simulating", total=len(pairs))

        def on_start(name: str) -> None:
            progress.update(task, description=f"simulating {name} ({len(jobs)} jobs)", advance=0)

        history = scenario.history(trace)
        results = compare_policies(scenario, pairs, jobs=jobs, on_start=on_start, history=history)
        progress.update(task, completed=len(pairs))
    return results


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
    scenario: Scenario, pairs: Sequence[PolicyPair], trace: Path | None, base_dir: Path, multiples: Sequence[float]
) -> dict[float, dict[str, RunResult]]:
    """Every pair at each multiple of the offered rate, on the same jobs with arrivals rescaled (common random
    numbers: attainment then falls with the load for a reason, not by the luck of a new sample)."""
    from slosched.experiment import compare_policies

    jobs = scenario.jobs(base_dir, trace)
    history = scenario.history(trace)
    span = jobs[-1].arrival_s - jobs[0].arrival_s if len(jobs) > 1 else 0.0
    rate = (len(jobs) - 1) / span if span > 0 else 1.0
    by_load: dict[float, dict[str, RunResult]] = {}
    for multiple in multiples:
        err.print(f"load x{multiple:g} ({rate * multiple:.3g} jobs/s)")
        scaled = [replace(job, arrival_s=job.arrival_s / multiple) for job in jobs]
        by_load[rate * multiple] = compare_policies(scenario, pairs, jobs=scaled, history=history)
    return by_load


def _emit(
    results: dict[str, RunResult],
    scenario: Scenario,
    as_json: bool,
    report: Path | None,
    by_load: dict[float, dict[str, RunResult]] | None = None,
) -> None:
    from slosched.metrics.summary import summarize
    from slosched.metrics.table import print_table

    summaries = {name: summarize(result) for name, result in results.items()}
    print_table(summaries, title=f"{scenario.name}: {len(next(iter(results.values())).jobs)} jobs", console=out)
    if report is not None:
        from slosched.metrics.report import write_report

        path = write_report(report, results, scenario.name, scenario.description, by_load=by_load)
        out.print(f"report: {path}")
    if as_json:
        payload = {"policies": {name: summary.to_json_dict() for name, summary in summaries.items()}}
        print(json.dumps(payload, allow_nan=False))


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
) -> None:
    """Simulate one policy pair on a scenario."""
    scenario = load(scenario_path, sets)
    pair = PolicyPair.parse(policy) if policy else scenario.policy_pairs()[0]
    _checked(trace, report)
    _emit(_run(scenario, [pair], trace, scenario_path.parent), scenario, as_json, report)


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
) -> None:
    """Compare policy pairs on identical arrivals and seed."""
    scenario = load(scenario_path, sets)
    pairs = [PolicyPair.parse(text) for text in policies.split(",")] if policies else scenario.policy_pairs()
    multiples = _multiples(loads)
    _checked(trace, report)
    results = _run(scenario, pairs, trace, scenario_path.parent)
    by_load = _by_load(scenario, pairs, trace, scenario_path.parent, multiples) if multiples else None
    _emit(results, scenario, as_json, report, by_load)


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
    _emit(_run(scenario, scenario.policy_pairs(), None, path.parent), scenario, as_json, report)
