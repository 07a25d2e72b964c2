"""A fixed CPU workload, timed inside a running process: how fast the host runs this core right now.

On a virtual machine the host slows a core for seconds at a time, each core on its own, and nothing inside
the guest sees it (``devtools.core_speed`` measures how much). A real engine's step on that core takes
longer by the same factor, give or take, so a simulation of one short replay of real traffic has to know
the core's speed during it as much as the engine's step costs. The vLLM plugin times this probe between
steps (its ``speed_probe_interval_s`` key) and writes it beside the steps; ``bench fidelity`` runs each
replay's simulation at the speed its probes saw (``fidelity.speed``).

The workload is small (80 products of 56 x 56 float32 matrices, about 0.3 ms on this machine's cores), so
a probe every 100 ms costs the engine under half a percent; the step log subtracts each probe from the
engine's period it fell into. The matrices stay below the size at which OpenBLAS splits a product over
threads (m n k < 262,144): the engine process is pinned to one core, and 96 x 96 products (the first
probe) ran on two BLAS threads fighting for it, which slowed the probe twofold for a whole 10-second
replay while the engine's own steps slowed far less.
"""

from __future__ import annotations

import json
import time

import numpy as np

_MATRIX = 56  # 56**3 = 175,616: one BLAS thread
_PRODUCTS = 80


class SpeedProbe:
    """Times the fixed workload; a fresh matrix per probe object, the same one every call."""

    __slots__ = ("_matrix",)

    def __init__(self, seed: int = 0) -> None:
        self._matrix = np.random.default_rng(seed).random((_MATRIX, _MATRIX), dtype=np.float32)

    def time_s(self) -> float:
        """Seconds the workload took now (perf_counter)."""
        start = time.perf_counter()
        for _ in range(_PRODUCTS):
            self._matrix @ self._matrix
        return time.perf_counter() - start


def probe_line(probe_s: float, done_s: float) -> str:
    """One probe as a JSON line of the step timing file: its duration and when it ended (perf_counter)."""
    return json.dumps({"probe_s": round(probe_s, 7), "done_s": round(done_s, 6)}) + "\n"
