"""``slosched bench saber``: SABER (SLA-aware admission) on the scoreboard (DESIGN 4.4 and section 9)."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.saber.runs import run

BENCHMARK = Benchmark(
    name="saber",
    summary="SABER (SLA-aware admission) on the scoreboard",
    run=run,
)
