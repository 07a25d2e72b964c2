"""``slosched bench ablation``: the stack's capacity with each of its mechanisms switched off in turn."""

from __future__ import annotations

from slosched.bench.ablation.runs import run
from slosched.bench.base import Benchmark

BENCHMARK = Benchmark(
    name="ablation",
    summary="the stack without each of its mechanisms, one at a time: SLO capacity on the stack bench's workloads",
    run=run,
)
