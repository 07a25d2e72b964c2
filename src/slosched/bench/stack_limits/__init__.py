"""``slosched bench stack-limits``: why the stack's targets sit where they do (issue 15: "where a target is
missed, the page says by how much and why, with the experiment that shows it")."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.stack_limits.runs import run

BENCHMARK = Benchmark(
    name="stack-limits",
    summary="the throughput and goodput ceilings that bound the stack's targets",
    run=run,
)
