"""``slosched bench relserve``: RelServe on the scoreboard (DESIGN section 9) and the paper's latency view."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.relserve.runs import run

BENCHMARK = Benchmark(
    name="relserve",
    summary="RelServe on the scoreboard and the paper's latency view",
    run=run,
)
