"""``slosched bench convergence``: how long a run of each ``bench stack`` workload must be for its SLO capacity
to hold at 4x the length."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.convergence.runs import run

BENCHMARK = Benchmark(
    name="convergence",
    summary="SLO capacity of the stack and its strongest baseline at 1x, 4x and 16x the run length, per workload",
    run=run,
)
