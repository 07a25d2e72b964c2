"""``slosched bench attainment``: who misses their deadline, by tenant and job kind, under the stack and its
strongest baseline at fractions of that baseline's capacity."""

from __future__ import annotations

from slosched.bench.attainment.runs import run
from slosched.bench.base import Benchmark

BENCHMARK = Benchmark(
    name="attainment",
    summary="SLO attainment by tenant and job kind, the stack vs its strongest baseline, at 0.5x-1.5x capacity",
    run=run,
)
