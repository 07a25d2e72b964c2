"""``slosched bench nexus``: NexusSched (LENS + PRISM) on the scoreboard (DESIGN section 9)."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.nexus.runs import run

BENCHMARK = Benchmark(
    name="nexus",
    summary="NexusSched (LENS + PRISM) on the scoreboard",
    run=run,
)
