"""devtools.affinity: a server's engine processes on one core, its HTTP side and the caller on the others."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from slosched.devtools.affinity import descendant_pids, isolate_engine, pin_threads

# A parent (standing in for vLLM's API server) that starts a child (its engine) and both sleep.
_TREE = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def process_tree() -> Iterator[tuple[subprocess.Popen[str], int]]:
    parent = subprocess.Popen([sys.executable, "-c", _TREE], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        yield parent, child
    finally:
        parent.kill()
        parent.wait()
        os.kill(child, 9)


def _affinities(pid: int) -> set[frozenset[int]]:
    return {frozenset(os.sched_getaffinity(int(task))) for task in os.listdir(f"/proc/{pid}/task")}


def test_descendants_are_found_through_every_thread(process_tree: tuple[subprocess.Popen[str], int]) -> None:
    parent, child = process_tree
    deadline = time.monotonic() + 10
    while child not in descendant_pids(parent.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child in descendant_pids(parent.pid)
    assert descendant_pids(child) == []
    assert descendant_pids(2**22 + 12345) == []  # no such process: nothing, no error


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="isolation needs two cores")
def test_isolate_engine_splits_the_cores_and_returns_the_callers_affinity(
    process_tree: tuple[subprocess.Popen[str], int],
) -> None:
    parent, child = process_tree
    before = os.sched_getaffinity(0)
    previous = isolate_engine(parent.pid, engine_cpu=0)
    try:
        front = frozenset(range(os.cpu_count() or 1)) - {0}
        assert previous == before
        assert _affinities(child) == {frozenset({0})}
        assert _affinities(parent.pid) == {front}
        assert os.sched_getaffinity(0) == front
    finally:
        os.sched_setaffinity(0, before)
    pin_threads(child, set(before))
    assert _affinities(child) == {frozenset(before)}
