"""``slosched bench engine-live``: one vLLM CPU server (tiny model) running the scheduler plugin; stock
vLLM scheduling (the plugin in ``bypass``: vLLM's own scheduler, the plugin only measures) against the
plugin policies, switched live through the control file, on traces where the engine policy should matter:
relQueries of mixed sizes, chat with mixed deadlines, and multi-stage workflows."""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.engine_live.runs import run

BENCHMARK = Benchmark(
    name="engine-live",
    summary="the vLLM scheduler plugin's policies against stock vLLM scheduling on a vLLM CPU server",
    run=run,
)
