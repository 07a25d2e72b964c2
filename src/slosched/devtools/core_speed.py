"""How steady each core of this machine is: a fixed matrix product timed in short windows on every core at once.

A benchmark that compares a real engine with its simulation (``bench fidelity``) needs to know how much
the machine itself moves. On a virtual machine a core's speed depends on what the host runs beside it,
which no process inside sees (the steal column of ``/proc/stat`` stays 0 here while the speed drops by a
third). One process per core, pinned, counts 256 x 256 float32 products (single-threaded BLAS) per window;
the figures are each core's speed range over the run and the correlation of the cores' windows (near 0:
the cores slow down independently, so a probe on one core cannot stand in for another).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

_MATRIX = 256
_BATCH = 10  # products between clock reads


@dataclass(slots=True, frozen=True)
class CoreSpeed:
    """Products per second in each window of each core (cores in ``os.sched_getaffinity`` order)."""

    window_s: float
    rates: dict[int, list[float]]

    def to_json_dict(self) -> dict[str, Any]:
        figures: dict[str, Any] = {"window_s": self.window_s, "cpu": cpu_description(), "cores": {}}
        for core, rates in self.rates.items():
            values = np.asarray(rates)
            figures["cores"][str(core)] = {
                "windows": len(rates),
                "slowest_over_fastest": round(float(values.min() / values.max()), 3),
                "p10_over_p90": round(float(np.percentile(values, 10) / np.percentile(values, 90)), 3),
                "rel_std": round(float(values.std() / values.mean()), 3),
            }
        if len(self.rates) >= 2:
            first, second = list(self.rates.values())[:2]
            count = min(len(first), len(second))
            figures["cross_core_correlation"] = round(float(np.corrcoef(first[:count], second[:count])[0, 1]), 3)
        return figures


def cpu_description(cpuinfo: str | None = None) -> dict[str, Any]:
    """The processor's model name and widest vector extension, from ``/proc/cpuinfo``: a CPU engine's step
    costs depend on both (vLLM's CPU kernels use AVX-512 where the processor has it), so two machines of one
    kind can run the same engine at very different speeds."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as file:
                cpuinfo = file.read()
        except OSError:
            return {"model": "unknown", "vector": "unknown"}
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    vector = next((name for name in ("avx512f", "avx2", "avx") if name in flags), "none")
    return {"model": fields.get("model name", "unknown"), "vector": vector.removesuffix("f")}


def _count_products(core: int, seconds: float, window_s: float) -> list[float]:
    os.sched_setaffinity(0, {core})
    matrix = np.random.default_rng(core).random((_MATRIX, _MATRIX), dtype=np.float32)
    rates: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        start, count = time.perf_counter(), 0
        while time.perf_counter() - start < window_s:
            for _ in range(_BATCH):
                matrix @ matrix
            count += _BATCH
        rates.append(count / (time.perf_counter() - start))
    return rates


def measure(seconds: float = 20.0, window_s: float = 0.5) -> CoreSpeed:
    """Every core's speed over ``seconds``, all cores at once (the machine should be otherwise idle).
    Single-threaded BLAS in the workers, so each stays on its own core."""
    cores = sorted(os.sched_getaffinity(0))
    previous = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    os.environ.update(dict.fromkeys(previous, "1"))  # read by the spawned workers' numpy at import
    try:
        with multiprocessing.get_context("spawn").Pool(len(cores)) as pool:
            results = pool.starmap(_count_products, [(core, seconds, window_s) for core in cores])
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return CoreSpeed(window_s, dict(zip(cores, results, strict=True)))
