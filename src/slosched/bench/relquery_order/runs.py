"""``slosched bench relquery-order``: each candidate's steady-state SLO capacity @90% on relQueries over a real
table, sent in table order and in prefix order (``setup``), every seed; the order's gain per candidate (same
relQueries, same policy) and, per order, each candidate against the strongest baseline chosen after the fact.
At 4x the run length (same seeds) the stack and that baseline are searched again under each order.

Beside the capacities, the reuse each order makes possible on the relQueries of the first seed: the share of
prompt tokens a row shares with the row sent before it (the paper's measure, on text) and the share the
simulated prefix cache hit at the stack's capacity (16-token blocks, one group level below the template).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from rich.markup import escape

import slosched.bench.relquery_order.setup as setup
from slosched.evaluation.capacity import Spread
from slosched.evaluation.formatting import print_figures
from slosched.evaluation.rows import row_finished
from slosched.evaluation.runners import run_tasks
from slosched.evaluation.sizing import work_rule_name, work_tolerance
from slosched.evaluation.steady import SteadySearch, converged, long_search, steady_capacity
from slosched.evaluation.workbench import simulate_candidate
from slosched.relquery.order import adjacent_shared_tokens

PAGE = Path("docs/results/relquery-order.md")
GUESS = 2.0


def _search(task: tuple[str, str, int, bool, bool]) -> tuple[float, float]:
    """(capacity, capacity at 4x the run length or NaN) of one candidate, order and seed (workers pickle it)."""
    order, label, seed, quick, long = task
    candidate = next(item for item in setup.candidates() if item.label == label)
    bench = setup.workbench(order, quick)
    search = SteadySearch(guess=GUESS, targets=(setup.TARGET,))
    found = steady_capacity(bench, candidate, seed, search)
    if not long:
        return found.capacity[setup.TARGET], math.nan
    longer = steady_capacity(bench, candidate, seed, long_search(found, search))
    return found.capacity[setup.TARGET], longer.capacity[setup.TARGET]


def reuse(order: str, seed: int, rate: float) -> dict[str, float]:
    """Text and simulated prefix reuse of ``order``'s relQueries (the stack at ``rate``, the first seed)."""
    bench = setup.workbench(order, quick=True)
    jobs, history = bench.workload(rate, seed)
    shared = text = 0
    for plan in setup.relquery_plans(order, bench.num_jobs, seed):
        shared += sum(adjacent_shared_tokens(plan.prompts))
        text += plan.input_tokens
    candidate = setup.candidates()[0]
    result = simulate_candidate(candidate, bench.instances, jobs, bench.options, seed, history)
    queried = sum(stats.prefix_query_tokens for stats in result.instances)
    hits = sum(stats.prefix_hit_tokens for stats in result.instances)
    return {"adjacent_shared_share": shared / text if text else 0.0, "simulated_hit_share": hits / queried}


def run(quick: bool) -> dict[str, Any]:
    started = time.perf_counter()
    sizes = setup.QUICK if quick else setup.FULL
    labels = [item.label for item in setup.candidates()]
    tasks = [(order, label, seed, quick, False) for order in setup.ORDERS for label in labels for seed in sizes.seeds]
    values = run_tasks(_search, tasks, f"relquery-order: {len(tasks)} capacity searches")
    capacity: dict[str, dict[str, list[float]]] = {order: {} for order in setup.ORDERS}
    for (order, label, _, _, _), (value, _) in zip(tasks, values, strict=True):
        capacity[order].setdefault(label, []).append(value)
    figures: dict[str, Any] = {
        "mode": "quick" if quick else "full",
        "seeds": list(sizes.seeds),
        "num_jobs": sizes.num_jobs,
        "work_rule": work_rule_name(work_tolerance(quick)),
        "target": setup.TARGET,
        "truth": sorted({spec.stack for spec in setup.workbench("table", quick).instances}),
        "orders": {order: _order_row(order, capacity[order]) for order in setup.ORDERS},
    }
    figures["order_gain"] = {
        label: _ratio(figures["orders"]["fields"]["capacity"][label], figures["orders"]["table"]["capacity"][label])
        for label in labels
    }
    figures["convergence"] = _convergence(figures, sizes.seeds, quick)
    stack = labels[0]
    figures["reuse"] = {
        order: reuse(order, sizes.seeds[0], figures["orders"][order]["capacity"][stack]["median"])
        for order in setup.ORDERS
    }
    figures["wall_s"] = time.perf_counter() - started
    print_figures("relquery-order", {escape(key): value for key, value in _summary(figures).items()})
    if not quick:
        from slosched.bench.relquery_order.report import write_page

        write_page(PAGE, figures)
    return figures


def _order_row(order: str, capacities: dict[str, list[float]]) -> dict[str, Any]:
    """Each candidate's spread, the strongest baseline (chosen after the fact) and each stack variant over it."""
    spreads = {label: _spread(values) for label, values in capacities.items()}
    baselines = {label: item for label, item in spreads.items() if not setup.is_stack(label)}
    strongest = max(baselines, key=lambda label: baselines[label]["median"])
    best = baselines[strongest]["median"]
    ratios = {
        label: item["median"] / best if best > 0 else math.nan
        for label, item in spreads.items()
        if setup.is_stack(label)
    }
    row_finished(
        f"{order} order", {"strongest": strongest, **{f"{label} / strongest": r for label, r in ratios.items()}}
    )
    return {"capacity": spreads, "strongest_baseline": strongest, "vs_strongest": ratios}


def _convergence(figures: dict[str, Any], seeds: tuple[int, ...], quick: bool) -> dict[str, Any]:
    """Per order: each stack variant and the strongest baseline at 4x the run length, same seeds; steady
    within 5%."""
    stacks = [item.label for item in setup.candidates() if setup.is_stack(item.label)]
    tasks = [
        (order, label, seed, quick, True)
        for order in setup.ORDERS
        for label in (*stacks, figures["orders"][order]["strongest_baseline"])
        for seed in seeds
    ]
    values = run_tasks(_search, tasks, f"relquery-order: {len(tasks)} searches at 4x the run length")
    longs: dict[str, dict[str, list[float]]] = {order: {} for order in setup.ORDERS}
    for (order, label, _, _, _), (_, long) in zip(tasks, values, strict=True):
        longs[order].setdefault(label, []).append(long)
    out: dict[str, Any] = {}
    for order, by_label in longs.items():
        out[order] = {}
        for label, values_4x in by_label.items():
            base = figures["orders"][order]["capacity"][label]["median"]
            long = _spread(values_4x)["median"]
            out[order][label] = {"capacity": base, "capacity_4x": long, "steady_state": converged(base, long)}
    return out


def _spread(values: list[float]) -> dict[str, Any]:
    figure = Spread.of([value for value in values if math.isfinite(value)]).as_json()
    figure["values"] = list(values)
    return figure


def _ratio(new: dict[str, Any], old: dict[str, Any]) -> float:
    return new["median"] / old["median"] if old["median"] > 0 else math.nan


def _summary(figures: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for order, row in figures["orders"].items():
        for label, ratio in row["vs_strongest"].items():
            summary[f"{order}: {label} / strongest ({row['strongest_baseline']})"] = ratio
    for label, gain in figures["order_gain"].items():
        summary[f"fields / table order: {label}"] = gain
    for order, item in figures["reuse"].items():
        summary[f"{order}: adjacent shared share"] = item["adjacent_shared_share"]
        summary[f"{order}: simulated hit share"] = item["simulated_hit_share"]
    return summary
