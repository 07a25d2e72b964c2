"""``slosched bench hexgen``: Hexgen-Text2SQL (DESIGN 4.1) on the shared scoreboard (DESIGN section 9)."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.hexgen.runs import run

BENCHMARK = Benchmark(
    name="hexgen",
    summary="Hexgen-Text2SQL on the scoreboard: SLO capacity against the strongest baseline, plus online retuning",
    run=run,
)
