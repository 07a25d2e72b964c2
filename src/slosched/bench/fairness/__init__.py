"""``slosched bench fairness``: the flooding-tenant done-when of fair sharing (a 3,000-row relQuery of one tenant
costs another at most 5 points of attainment), simulated over seeds and live against ``slosched serve`` with
stub backends, with and without tenant weights; exits non-zero when fair sharing misses the bound."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.fairness.runs import run

BENCHMARK = Benchmark(
    name="fairness",
    summary="a flooding tenant's cost to the others' attainment, with and without fair sharing (sim and live)",
    run=run,
)
