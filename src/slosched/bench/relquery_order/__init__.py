"""``slosched bench relquery-order``: relQueries over a real table sent in table order and in prefix order."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.relquery_order.runs import run

BENCHMARK = Benchmark(
    name="relquery-order",
    summary="relQueries over a real table in table order vs prefix order (rows sorted, repeated fields first)",
    run=run,
)
