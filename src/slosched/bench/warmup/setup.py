"""Settings of ``slosched bench warmup``: the same measured jobs after warm-up prefixes of several lengths.

Every capacity the scoreboard publishes is judged on jobs that arrive after a discarded warm-up prefix
(``evaluation/sizing.py``). If the prefix ends before a cold cluster has settled (prefix caches filled, the
backlog a cold start builds drained), the first measured jobs pay for the cold start and a short run's
capacity comes out low. This bench holds everything else fixed: per ``bench stack`` workload, the stack (as
that bench runs it, self-tuning) and the strongest baseline ``docs/results/stack/stack.json`` names, each
seed's measured jobs (as many as the steady-state window rule asks at the rate), at the rate where that
baseline's capacity lies (its median there), after prefixes spanning ``PREFIXES`` p90 no-contention
latencies of arrivals and after the quarter of the run the scoreboard used before 2026-12-05. Per prefix:
attainment over all measured jobs, over those arriving in the first eighth of the window (where a start
transient shows) and in its second half, median [min-max] over seeds. The verdict per workload is the
shortest prefix from which every longer one keeps both policies' median attainment within ``TOLERANCE`` of
the longest prefix's: what the workload needs, set beside the rule's 10 p90 latencies.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import slosched.bench.convergence.setup as convergence_setup
import slosched.bench.stack.setup as stack_setup

WORKLOADS_ENV = "SLOSCHED_WARMUP_WORKLOADS"
FULL_SEEDS = (1, 2, 3, 4, 5)  # ``bench stack``'s
QUICK_SEEDS = (1,)
QUICK_WORKLOADS = ("chat",)  # short jobs: the cheapest of the five
# Prefix lengths in p90 no-contention latencies of arrivals at the run's rate; None: a quarter of the measured
# jobs (the rule before 2026-12-05). The rule's own prefix is 10 (``sizing.prefix_factor``).
PREFIXES: tuple[float | None, ...] = (None, 2.5, 5.0, 10.0, 20.0)
TOLERANCE = 0.01
STACK_RESULTS = convergence_setup.STACK_RESULTS


def workload_names(quick: bool) -> tuple[str, ...]:
    """The workloads ``SLOSCHED_WARMUP_WORKLOADS`` names (comma-separated), in the stack bench's order; unset:
    all five (full) or ``QUICK_WORKLOADS``."""
    all_five = tuple(workload.name for workload in stack_setup.WORKLOADS)
    return stack_setup.workloads_named(WORKLOADS_ENV) or (QUICK_WORKLOADS if quick else all_five)


def policies(workload: str) -> tuple[str, str]:
    """The stack's label and the strongest baseline's for ``workload``."""
    return stack_setup.STACK_LABEL, convergence_setup.strongest_baseline(workload)


def operating_rate(workload: str, baseline: str, results: Path | None = None) -> float:
    """The strongest baseline's median capacity on ``workload`` as ``bench stack`` recorded it (a rate near
    where capacities are decided), else the workload's first capacity guess."""
    path = results or STACK_RESULTS
    if path.exists():
        row = json.loads(path.read_text(encoding="utf-8")).get("workloads", {}).get(workload, {})
        rate = row.get("capacity_rps", {}).get(baseline)
        if isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0:
            return float(rate)
    return stack_setup.workload(workload).guess


def prefix_label(factor: float | None) -> str:
    return "a quarter of the run" if factor is None else f"{factor:g}x p90"


def prefix_count(factor: float | None, measured: int, p90_s: float, rate: float) -> int:
    """The prefix's jobs: a quarter of the ``measured`` jobs, or the arrivals of ``factor`` p90 latencies."""
    if factor is None:
        return max(1, measured // 4)
    return max(1, math.ceil(factor * p90_s * rate))
