"""``slosched bench stack``: the composed policy ``slosched`` against the strongest baseline on five workloads."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.stack.runs import run

BENCHMARK = Benchmark(
    name="stack",
    summary="the composed policy slosched against the strongest baseline on five workloads",
    run=run,
)
