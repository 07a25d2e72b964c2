"""``slosched bench admission``: job-level admission under overload (``runs.py``)."""

from slosched.bench.admission.runs import run
from slosched.bench.base import Benchmark

BENCHMARK = Benchmark("admission", "the stack's goodput at 1-3x its capacity, with and without job admission", run)
