"""``slosched bench stack-limits``: why the stack's targets sit where they do (issue 15: "where a target is
missed, the page says by how much and why, with the experiment that shows it").

Two ceilings per workload of ``slosched bench stack``, read against that bench's full run (its JSON, saved as
``docs/results/stack/stack.json``; ``SLOSCHED_STACK_JSON`` names another):

1. **Capacity ceiling.** No policy can meet 90% of deadlines at an arrival rate much above what the cluster
   completes at all. The experiment offers each workload at ``OVERLOADS`` x the higher of the stack's and the
   strongest baseline's capacity (runs sized by the steady-state rule at that rate, warm-up prefix, the
   bench's seeds) under the stack and under the strongest baseline and counts the jobs completed per second
   over the second half of the arrival window, once the backlog has formed (SLOs ignored): the sustained
   throughput, the best over loads and the two policies (median over seeds). ``ceiling_holds`` checks that
   no capacity exceeds it by more than ``CEILING_SLACK`` (5%). ``throughput / capacity of the strongest
   baseline`` estimates the capacity ratio the cluster leaves room for (an estimate, not a proof: another
   policy could sustain more). Where it sits near 1, the
   strongest baseline already runs the cluster near saturation at its capacity, and a 1.2x target is out of
   reach for these policies.
2. **Goodput ceiling at 2x.** Goodput counts SLO-meeting jobs per second of the arrival window, so it cannot
   exceed the arrival rate, ``2 x capacity of the strongest baseline``; the ratio against the strongest
   baseline at 2x therefore cannot exceed ``2 x capacity / its goodput there``. A baseline that keeps its
   goodput near its capacity under overload (it does not collapse) caps every policy's ratio below 2.

Quick: 2 seeds; full: 5.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import slosched.bench.stack.setup as setup
from slosched.core.errors import ConfigError
from slosched.evaluation.formatting import print_figures
from slosched.evaluation.rows import row_finished
from slosched.evaluation.runners import run_tasks
from slosched.evaluation.throughput import sustained_throughput
from slosched.evaluation.workbench import Candidate

JSON_ENV = "SLOSCHED_STACK_JSON"
DEFAULT_JSON = Path("docs/results/stack/stack.json")
PAGE = Path("docs/results/stack-limits.md")
QUICK_SEEDS, FULL_SEEDS = (1, 2), (1, 2, 3, 4, 5)


def load_stack_figures(path: Path) -> dict[str, Any]:
    """The stack bench's JSON (its last printed line, or a file holding just that object); a missing or
    unreadable file is a ``ConfigError`` naming where the path came from."""
    try:
        text = path.read_text(encoding="utf-8").strip()
        figures = json.loads(text.splitlines()[-1]) if text else None
    except (OSError, json.JSONDecodeError) as error:
        raise ConfigError(JSON_ENV, f"cannot read the stack bench's JSON at {path}: {error}") from None
    if not isinstance(figures, dict) or "workloads" not in figures:
        raise ConfigError(JSON_ENV, f"{path} holds no `slosched bench stack --json` result (no 'workloads')")
    return figures


def _policy_text(label: str) -> str:
    """A scoreboard label (``least-tokens+chunked-fcfs[token_budget=512]``) as the policy it names."""
    return label.split("[", 1)[0]


def _engine_params(label: str) -> dict[str, int]:
    if "[" not in label:
        return {}
    inner = label.split("[", 1)[1].rstrip("]")
    return {key: int(value) for key, value in (item.split("=") for item in inner.split(",") if item)}


# x the higher capacity: above it the backlog grows through the window; several loads, since a deep overload
# may thrash (preemptions) and complete less than a mild one.
OVERLOADS = (1.25, 2.0, 3.0)
CEILING_SLACK = 0.05
# Below this share of its capacity kept as goodput at 2x the strongest baseline has collapsed there, and 2x its
# capacity over its goodput is no ceiling: code's baseline kept 0.002 and the bound read 2,636x.
COLLAPSED_SHARE = 0.1


def _saturation(task: tuple[str, str, float, int, bool]) -> float:
    """Sustained throughput of one policy (a scoreboard label) on one workload under a steady overload. A
    burst queued at once would undercount it where a burst thrashes the KV cache (chat), hence
    ``sustained_throughput``, not ``saturation_throughput``."""
    name, label, rate, seed, quick = task
    bench = setup.workload(name).workbench(quick=quick)
    candidate = (
        setup.stack_candidates()[0]
        if label == setup.STACK_LABEL
        else Candidate.of(_policy_text(label), _engine_params(label) or None)
    )
    return sustained_throughput(bench, candidate, rate, seed)


def limits_of(name: str, row: dict[str, Any], saturation: dict[str, float]) -> dict[str, Any]:
    strongest = row["strongest_baseline"]
    capacity = row["capacity_rps"][strongest]
    at_2x = row.get("strongest_per_load", {}).get("2x", {}).get("goodput", math.nan)
    best_saturation = max((value for value in saturation.values() if math.isfinite(value)), default=math.nan)
    capacities = [
        row["capacity_rps"][label] for label in (strongest, setup.STACK_LABEL) if label in row["capacity_rps"]
    ]
    return {
        "sustained_jobs_per_s": best_saturation,
        "max_capacity_over_sustained": (
            max(capacities, default=math.nan) / best_saturation if best_saturation > 0 else math.nan
        ),
        "ceiling_holds": all(value <= (1 + CEILING_SLACK) * best_saturation for value in capacities),
        "strongest_baseline": strongest,
        "capacity_strongest": capacity,
        "saturation_jobs_per_s": saturation,
        "capacity_ceiling_ratio": best_saturation / capacity if capacity > 0 else math.nan,
        "capacity_ratio_measured": row["ratio_vs_strongest"],
        "capacity_target": row["capacity_target"],
        "strongest_goodput_2x": at_2x,
        "strongest_goodput_2x_over_capacity": at_2x / capacity if capacity > 0 else math.nan,
        "goodput_ceiling_2x": 2.0 * capacity / at_2x
        if capacity > 0 and at_2x >= COLLAPSED_SHARE * capacity
        else math.nan,
        "goodput_ratio_2x_measured": row["goodput_ratio_2x"],
    }


def run(quick: bool) -> dict[str, Any]:
    figures = load_stack_figures(Path(os.environ.get(JSON_ENV, str(DEFAULT_JSON))))
    seeds = QUICK_SEEDS if quick else FULL_SEEDS
    result = {name: workload_limits(name, row, seeds, quick) for name, row in figures["workloads"].items()}
    out = {"workloads": result, "seeds": len(seeds), "source_mode": figures.get("mode", "?")}
    print_figures("stack-limits", _summary(result))
    if not quick:
        from slosched.bench.stack_limits.report import write_page

        write_page(PAGE, out)
    return out


def workload_limits(name: str, row: dict[str, Any], seeds: Sequence[int], quick: bool) -> dict[str, Any]:
    """One workload's limits from its saturation runs (the stack and the strongest baseline at each of
    ``OVERLOADS``, every seed, spread over the workers): a finished row, kept if the run is interrupted."""
    tasks = [
        (name, label, load * _top_capacity(row), seed, quick)
        for label in (setup.STACK_LABEL, row["strongest_baseline"])
        for load in OVERLOADS
        for seed in seeds
    ]
    values = run_tasks(_saturation, tasks, f"stack limits: {name} saturation runs")
    per: dict[str, dict[float, list[float]]] = {}
    for (_, label, rate, _, _), value in zip(tasks, values, strict=True):
        per.setdefault(label, {}).setdefault(rate, []).append(value)
    limits = limits_of(name, row, {label: _best(by_rate) for label, by_rate in per.items()})
    limits["truth"] = row.get("truth", [])
    row_finished(name, limits)
    return limits


def _top_capacity(row: dict[str, Any]) -> float:
    """The higher of the stack's and the strongest baseline's capacity: the loads are multiples of it."""
    labels = (row["strongest_baseline"], setup.STACK_LABEL)
    return max(row["capacity_rps"][label] for label in labels if label in row["capacity_rps"])


def _best(by_rate: dict[float, list[float]]) -> float:
    """The highest median (over seeds) sustained throughput over the loads."""
    medians = [_median(values) for values in by_rate.values()]
    return max((value for value in medians if math.isfinite(value)), default=math.nan)


def _median(values: Sequence[float]) -> float:
    finite = [value for value in values if math.isfinite(value)]
    return float(statistics.median(finite)) if finite else math.nan


def _summary(result: dict[str, dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for name, row in result.items():
        summary[f"{name}: capacity ceiling ratio"] = row["capacity_ceiling_ratio"]
        summary[f"{name}: ceiling holds"] = row["ceiling_holds"]
        summary[f"{name}: goodput ceiling at 2x"] = row["goodput_ceiling_2x"]
    return summary
