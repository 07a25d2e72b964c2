"""``slosched tune``: tune the ``slosched`` stack's knobs on recent traffic, by replaying it in the simulator
(``tuning/stack.py``), and print the parameter block to deploy.

The traffic is the scenario's workload or, with ``--trace``, a recorded one (``slosched trace import``
converts a user's log); the most recent jobs are replayed on the scenario's cluster at their own rate (or
``--rate``), at that rate and under more load. The chosen block goes into a scenario's
``policy_params.stack.slosched`` or a gateway config's ``stack_params``, and its engine keys into the vLLM
plugin's ``params`` (preset ``slosched``; docs/stack.md, "Self-tuning"). Rerun it when the traffic changes;
benches tune the stack the same way before every run.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Annotated

import typer
import yaml
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from slosched.cli.common import JsonOpt, ScenarioArg, SetOpt, TraceOpt, err, input_file, out
from slosched.cli.simulate import SeedOpt, load
from slosched.core.errors import ConfigError
from slosched.tuning.stack import STACK, StackTuneConfig, StackTuner, StackTuneResult, settings_of


def tune(
    scenario_path: ScenarioArg,
    trace: TraceOpt = None,
    rate: Annotated[
        float | None, typer.Option(help="replay the traffic at this rate (jobs/s); default: its own")
    ] = None,
    as_json: JsonOpt = False,
    sets: SetOpt = None,
    seed: SeedOpt = 0,
) -> None:
    """Tune the slosched stack's knobs on recent traffic and print the parameter block to deploy."""
    from slosched.cli.simulate import _bench, _rate

    scenario = load(scenario_path, sets)
    if trace is not None:
        input_file(trace, "--trace")
    if rate is not None and not rate > 0:
        raise ConfigError("--rate", f"must be > 0 jobs/s, got {rate}")
    bench = _bench(scenario, trace, scenario_path.parent)
    chosen_rate = rate if rate is not None else _rate(bench)
    _, history = bench.workload(chosen_rate, seed)
    # The traffic at unit rate (a trace keeps its own shape), then at the chosen rate.
    window = [replace(job, arrival_s=job.arrival_s / chosen_rate) for job in bench.jobs(bench.num_jobs, seed)]
    base = dict(scenario.params().stack.get(STACK, {}))
    config = StackTuneConfig(
        bench.instances, settings_of(base), options=bench.options, history=tuple(history), seed=seed
    )
    tuner = StackTuner(config)
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True
    ) as progress:
        progress.add_task(f"replaying {min(len(window), config.max_window_jobs)} jobs at {chosen_rate:.3g} jobs/s")
        result = tuner.retune(window)
    block = {**base, **result.settings}
    if as_json:
        out.print_json(json.dumps({"rate": chosen_rate, "block": block, **result.as_json()}))
        return
    out.print(_table(result, config))
    replayed = min(len(window), config.max_window_jobs)
    out.print(
        f"tuned in {result.seconds:.1f} s on {replayed} jobs at {chosen_rate:.3g} jobs/s; "
        f"deploy as policy_params.stack.{STACK} (or a gateway's stack_params):"
    )
    out.print(yaml.safe_dump({STACK: block}, sort_keys=False).rstrip(), markup=False, highlight=False)


def _table(result: StackTuneResult, config: StackTuneConfig) -> Table:
    table = Table(title="candidates (attainment of the window's jobs at each load)")
    table.add_column("settings")
    for factor in config.load_factors:
        table.add_column(f"{factor:g}x", justify="right")
    table.add_column("jobs met, all loads", justify="right")
    table.add_column("mean latency at 1x (s)", justify="right")
    chosen = settings_of(result.settings)
    for settings, score in result.scores.items():
        label = escape(", ".join(f"{key}={value}" for key, value in settings))
        table.add_row(
            f"[bold]{label}[/bold] (chosen)" if settings == chosen else label,
            *(f"{value:.3f}" for value in score.attainment),
            f"{score.met_jobs} of {score.scored * len(score.attainment)}",
            f"{score.mean_latency_s:.2f}",
        )
    return table
