"""``slosched bench warmup``: how long a run's discarded warm-up prefix must be for the measured jobs to start
on a warm cluster, per ``bench stack`` workload."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.warmup.runs import run

BENCHMARK = Benchmark(
    name="warmup",
    summary="attainment of the same measured jobs after warm-up prefixes of several lengths, per workload",
    run=run,
)
