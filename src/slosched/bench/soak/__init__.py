"""``slosched bench soak``: the gateway under a steady mixed load for 10 minutes (``--quick``: 30 s),
its resident memory over time, and the proof that every request ended in exactly one terminal state."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.soak.runs import run

BENCHMARK = Benchmark(
    name="soak",
    summary="the gateway under a steady mixed load: resident memory over time, one terminal state per request",
    run=run,
)
