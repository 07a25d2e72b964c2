"""Benchmarks by name, the one place they are listed: each module holds a ``BENCHMARK`` (``bench.base``),
imported only when that benchmark runs (several need optional extras or a server)."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from slosched.bench.base import Benchmark
from slosched.core.errors import UnknownNameError

BenchFn = Callable[[bool], dict[str, Any]]

_BENCH_MODULES = {
    "ablation": "slosched.bench.ablation",
    "attainment": "slosched.bench.attainment",
    "admission": "slosched.bench.admission",
    "relserve": "slosched.bench.relserve",
    "relquery-order": "slosched.bench.relquery_order",
    "sim-speed": "slosched.bench.sim_speed",
    "queue-passes": "slosched.bench.queue_passes",
    "gateway": "slosched.bench.gateway",
    "live": "slosched.bench.live",
    "hexgen": "slosched.bench.hexgen",
    "saber": "slosched.bench.saber",
    "nexus": "slosched.bench.nexus",
    "overhead": "slosched.bench.overhead",
    "engine-live": "slosched.bench.engine_live",
    "fidelity": "slosched.bench.fidelity",
    "soak": "slosched.bench.soak",
    "stack": "slosched.bench.stack",
    "stack-limits": "slosched.bench.stack_limits",
    "chaos": "slosched.bench.chaos",
    "convergence": "slosched.bench.convergence",
    "warmup": "slosched.bench.warmup",
    "fairness": "slosched.bench.fairness",
    "libs": "slosched.bench.libs",
}


def bench_names() -> list[str]:
    return sorted(_BENCH_MODULES)


@functools.cache
def get_benchmark(name: str) -> Benchmark:
    module_name = _BENCH_MODULES.get(name)
    if module_name is None:
        raise UnknownNameError("bench", name, bench_names())
    benchmark = importlib.import_module(module_name).BENCHMARK
    if not isinstance(benchmark, Benchmark) or benchmark.name != name:
        raise TypeError(f"{module_name}.BENCHMARK must be a Benchmark named {name!r}, got {benchmark!r}")
    return benchmark


def get_bench(name: str) -> BenchFn:
    """The run function of benchmark ``name`` (what ``slosched bench NAME`` calls)."""
    return get_benchmark(name).run
