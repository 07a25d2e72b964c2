"""``slosched bench ablation``: each variant of ``setup.VARIANTS`` searched for its steady-state SLO capacity
@90% (``evaluation/steady.py``: runs sized to 20x the p90 no-contention latency, judged on all jobs and on
the second half of the window) on each selected workload, every seed; the median over seeds and its ratio to
the full stack's median. Tasks (workload, variant, seed) are spread over the workers; a workload's row is
finished (and printed) once its tasks are done.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import slosched.bench.ablation.setup as setup
import slosched.bench.stack.setup as stack_setup
from slosched.evaluation.capacity import Spread
from slosched.evaluation.formatting import print_figures
from slosched.evaluation.rows import row_finished
from slosched.evaluation.runners import run_tasks
from slosched.evaluation.steady import SteadySearch, steady_capacity
from slosched.evaluation.task_cache import TALLY

PAGE = Path("docs/results/ablation.md")


def _capacity(task: tuple[str, str, int, bool]) -> float:
    """One variant's steady-state capacity @90% on one workload and seed (module level: workers pickle it)."""
    name, label, seed, quick = task
    workload = stack_setup.workload(name)
    search = SteadySearch(guess=workload.guess, targets=(setup.TARGET,))
    found = steady_capacity(workload.workbench(quick), setup.variant(label).candidate(), seed, search)
    return found.capacity[setup.TARGET]


def spread(values: Sequence[float]) -> dict[str, Any]:
    """``Spread`` over the finite values (a failed seed is left out), with every value in seed order."""
    figure = Spread.of([value for value in values if math.isfinite(value)]).as_json()
    figure["values"] = list(values)
    return figure


def ablation_row(capacities: dict[str, list[float]]) -> dict[str, Any]:
    """One workload's figures from each variant's capacities (seed order): spread, and the median over the
    full stack's median (below 1: the stack loses capacity without that mechanism)."""
    spreads = {label: spread(values) for label, values in capacities.items()}
    full = spreads[setup.FULL_STACK.label]["median"]
    ratios = {
        label: (item["median"] / full if math.isfinite(item["median"]) and full > 0 else math.nan)
        for label, item in spreads.items()
    }
    return {"capacity": spreads, "ratio_to_stack": ratios}


def workload_ablation(
    name: str, seeds: Sequence[int], quick: bool, variants: Sequence[setup.Ablation] = setup.VARIANTS
) -> dict[str, Any]:
    tasks = [(name, item.label, seed, quick) for item in variants for seed in seeds]
    values = run_tasks(_capacity, tasks, f"ablation: {name} ({len(variants)} variants x {len(seeds)} seeds)")
    capacities: dict[str, list[float]] = {}
    for (_, label, _, _), value in zip(tasks, values, strict=True):
        capacities.setdefault(label, []).append(value)
    row = ablation_row(capacities)
    row["truth"] = list(stack_setup.workload(name).workbench(quick).truth)
    row["description"] = stack_setup.workload(name).description
    row_finished(name, {f"{label} / stack": ratio for label, ratio in row["ratio_to_stack"].items()})
    return row


def run(quick: bool) -> dict[str, Any]:
    started = time.perf_counter()
    names = setup.selected_workloads(quick)
    seeds = setup.seeds_for(quick)
    variants = setup.selected_variants()
    all_names = [item.name for item in stack_setup.WORKLOADS]
    out: dict[str, Any] = {
        "mode": "quick" if quick else "full",
        "seeds": list(seeds),
        "target": setup.TARGET,
        "variants": [
            {
                "label": item.label,
                "layer": item.layer,
                "switched_off": item.switched_off,
                "settings": dict(item.settings),
            }
            for item in variants
        ],
        "workloads": {name: workload_ablation(name, seeds, quick, variants) for name in names},
        "left_out": [name for name in all_names if name not in names],
        "variants_left_out": [item.label for item in setup.VARIANTS if item not in variants],
    }
    out["wall_s"] = time.perf_counter() - started
    out["task_cache"] = TALLY.figures()
    print_figures("ablation", _summary(out["workloads"], variants))
    if not quick:
        from slosched.bench.ablation.report import write_page

        write_page(PAGE, out)
    return out


def _summary(workloads: dict[str, dict[str, Any]], variants: Sequence[setup.Ablation]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for name, row in workloads.items():
        summary[f"{name}: stack capacity"] = row["capacity"][setup.FULL_STACK.label]["median"]
        for item in variants[1:]:
            summary[f"{name}: {item.label} / stack"] = row["ratio_to_stack"][item.label]
    return summary
