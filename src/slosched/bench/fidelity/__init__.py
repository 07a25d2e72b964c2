"""``slosched bench fidelity``: how closely the simulator predicts a real vLLM engine."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.fidelity.runs import run

BENCHMARK = Benchmark(
    name="fidelity",
    summary="how closely the simulator predicts a real vLLM CPU engine",
    run=run,
)
