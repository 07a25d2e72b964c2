"""``slosched bench chaos``: a chaos suite that counts. It starts the gateway as a real server process in
front of two fake vLLM servers (one with switchable faults, ``devtools.faulty``; see ``setup``) and
runs probe families against it, in this order:"""

from __future__ import annotations

from slosched.bench.base import Benchmark
from slosched.bench.chaos.runs import run

BENCHMARK = Benchmark(
    name="chaos",
    summary="the gateway as a real server under faults, bad input, fuzzing and tenants; every request counted",
    run=run,
)
