"""``slosched bench fairness``: the flooding-tenant done-when, simulated (per seed) and live (per repetition).

Figures (JSON): for ``sim`` and ``live``, the other tenant's attainment (in [0, 1]) calm and under the flood,
with fair sharing (``*_fair``) and without (``*_fcfs``), the drops in points, the flooder's own attainment:
medians over the seeds / repetitions, each with its ``[min, max]`` spread and the per-run values. ``passed``:
every run's fair drop is at most ``MAX_DROP_POINTS``; when one is not, the run raises
``BenchmarkFailed`` (``slosched bench`` prints the figures, one ``error:`` line, and exits non-zero).
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import asdict
from typing import Any

from slosched.bench.base import BenchmarkFailed
from slosched.bench.fairness.live import live_flood
from slosched.bench.fairness.setup import EXAMPLE, FULL, MAX_DROP_POINTS, QUICK, RESULTS, Plan
from slosched.core.errors import ConfigError
from slosched.evaluation.formatting import print_figures
from slosched.evaluation.rows import row_finished
from slosched.experiment import FloodFigures, flood_figures
from slosched.scenario.config import load_scenario

FIELDS = ("calm_fair", "flood_fair", "calm_fcfs", "flood_fcfs", "flooder_fair", "flooder_fcfs")


def simulated(seeds: tuple[int, ...]) -> list[FloodFigures]:
    """``examples/flooding-tenant.yaml`` under each seed (its jobs and the simulator's noise)."""
    if not EXAMPLE.is_file():
        raise ConfigError(str(EXAMPLE), "the flooding-tenant scenario is missing: run the bench from a checkout")
    scenario = load_scenario(EXAMPLE)
    return [flood_figures(scenario.model_copy(update={"seed": seed}), EXAMPLE.parent) for seed in seeds]


def summarise(runs: list[FloodFigures]) -> dict[str, Any]:
    """Medians, ``[min, max]`` spreads and per-run values of the figures of several runs."""
    per_run = [
        {**asdict(run), "drop_fair_points": run.drop_fair_points, "drop_fcfs_points": run.drop_fcfs_points}
        for run in runs
    ]
    figures: dict[str, Any] = {"flooder": runs[0].flooder, "runs": len(runs)}
    for name in (*FIELDS, "drop_fair_points", "drop_fcfs_points"):
        values = [round(float(run[name]), 4) for run in per_run]
        figures[name] = statistics.median(values)
        figures[f"{name}_spread"] = [min(values), max(values)]
    figures["per_run"] = per_run
    return figures


def _shown(figures: dict[str, Any]) -> dict[str, Any]:
    shown = {}
    for name in (*FIELDS, "drop_fair_points", "drop_fcfs_points"):
        low, high = figures[f"{name}_spread"]
        scale = 1.0 if name.startswith("drop") else 100.0
        unit = " points" if name.startswith("drop") else "%"
        shown[name] = f"{scale * figures[name]:.1f}{unit} ({scale * low:.1f}, {scale * high:.1f})"
    return shown


def measure(plan: Plan) -> dict[str, Any]:
    """Both halves, their summaries and the verdict (no exception: ``run`` raises on a miss)."""
    sim = summarise(simulated(plan.seeds))
    sim["seeds"] = list(plan.seeds)
    row_finished("sim", sim)  # kept if Ctrl-C stops the live half
    print_figures(f"simulated flood: median (min, max) over {len(plan.seeds)} seeds", _shown(sim))
    live = summarise([live_flood() for _ in range(plan.live_runs)])
    print_figures(f"live flood, slosched serve + stubs: median (min, max) over {plan.live_runs} runs", _shown(live))
    worst = {"sim": sim["drop_fair_points_spread"][1], "live": live["drop_fair_points_spread"][1]}
    passed = all(drop <= MAX_DROP_POINTS for drop in worst.values())
    return {
        "sim": sim,
        "live": live,
        "max_drop_points": MAX_DROP_POINTS,
        "worst_drop_fair_points": worst,
        "passed": passed,
    }


def run(quick: bool) -> dict[str, Any]:
    figures = measure(QUICK if quick else FULL)
    worst = figures["worst_drop_fair_points"]
    verdict = "PASS" if figures["passed"] else "FAIL"
    drops = ", ".join(f"{half} {drop:.1f}" for half, drop in worst.items())
    print(f"fairness {verdict}: worst fair drop {drops} points (bound {MAX_DROP_POINTS:.0f})", file=sys.stderr)
    if not quick:
        from slosched.bench.fairness.report import write_report

        write_report(figures, RESULTS)
    if not figures["passed"]:
        over = [half for half, drop in worst.items() if drop > MAX_DROP_POINTS]
        message = f"fairness: with fair sharing the flood costs the other tenant more than {MAX_DROP_POINTS:.0f} points"
        raise BenchmarkFailed(f"{message} ({', '.join(f'{h}: {worst[h]:.1f}' for h in over)})", figures)
    return figures
