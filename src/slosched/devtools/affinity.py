"""Keep a vLLM CPU server's engine and its HTTP side on separate cores (measurement runs only).

vLLM's OpenAI server is three processes: the API server (HTTP, tokenizing, one server-sent event per
streamed token), its engine core (the scheduler loop, output serialization) and the model worker. Only
the worker's OpenMP threads follow ``VLLM_CPU_OMP_THREADS_BIND``; everything else floats. On a small
machine the API server and a client streaming from it then steal the engine's core in proportion to the
load, and the engine core's loop lands on the busy HTTP core: step times grow with the token rate in a way
no step model reproduces. Measured on the 2-core machine (fidelity traces at 0.75 of capacity): with only
the API server pinned, the client saw 2.2 s mean latency where the engine's own metrics said 0.98 s; with
every engine thread on the engine core as well, 0.92 s against 0.90 s.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def descendant_pids(pid: int) -> list[int]:
    """Every process below ``pid`` (children of all its threads, recursively), from ``/proc``."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                for child in (task / "children").read_text().split():
                    found.append(int(child))
                    found += descendant_pids(int(child))
    return found


def pin_threads(pid: int, cpus: set[int]) -> None:
    """Pin every current thread of ``pid`` to ``cpus`` (threads that ended meanwhile are skipped)."""
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(int(task.name), cpus)


def isolate_engine(api_server_pid: int, engine_cpu: int) -> set[int] | None:
    """Pin the server's engine processes to ``engine_cpu`` and its API server, with the calling process
    (the client), to the other cores; return the caller's previous affinity to restore, or None (and pin
    nothing) on a single-core machine."""
    cores = os.cpu_count() or 1
    if cores < 2:
        return None
    front = set(range(cores)) - {engine_cpu}
    for child in descendant_pids(api_server_pid):
        pin_threads(child, {engine_cpu})
    pin_threads(api_server_pid, front)
    previous = os.sched_getaffinity(0)
    os.sched_setaffinity(0, front)
    return previous
