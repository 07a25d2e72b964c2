"""``slosched bench live``: the slosched stack against the baselines on real vLLM CPU servers (tiny models of
2 and 8 layers), on CHESS Text-to-SQL workflows and on a mixed multi-tenant workload (``setup``)."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.live.runs import run

BENCHMARK = Benchmark(
    name="live",
    summary="the slosched stack against the baselines on real vLLM CPU servers",
    run=run,
)
