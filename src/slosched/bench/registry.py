"""Benchmarks by name: each returns a JSON-able dict of figures and prints a human summary."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from slosched.core.errors import UnknownNameError

BenchFn = Callable[[bool], dict[str, Any]]

_BENCH_MODULES = {
    "relserve": "slosched.bench.relserve",
    "sim-speed": "slosched.bench.sim_speed",
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
}


def bench_names() -> list[str]:
    return sorted(_BENCH_MODULES)


@functools.cache
def get_bench(name: str) -> BenchFn:
    module_name = _BENCH_MODULES.get(name)
    if module_name is None:
        raise UnknownNameError("bench", name, bench_names())
    module = importlib.import_module(module_name)
    run: BenchFn = module.run
    return run
