"""The local process pool stops at once on Ctrl-C: its workers ignore SIGINT and the parent kills them."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from slosched.tuning.executors import ProcessExecutor
from tests.procs import PARENT, live_pids


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _children() -> list[int]:
    """Live (not zombie) child processes of this one."""
    return list(live_pids(PARENT, os.getpid()))


def test_ctrl_c_during_a_map_kills_the_workers_and_closes_the_pool() -> None:
    pool = ProcessExecutor(max_workers=2)
    before = set(_children())
    assert pool.map(_sleep, [0.0, 0.0]) == [0.0, 0.0]  # the pool is up
    assert set(_children()) - before
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            pool.map(_sleep, [60.0, 60.0, 60.0])
    finally:
        timer.cancel()
        pool.close()
    assert time.monotonic() - started < 10  # not the 60 s a worker would have slept
    assert not set(_children()) - before  # no worker left
    assert pool.map(_sleep, [0.0, 0.0]) == [0.0, 0.0]  # a closed pool starts afresh on next use
    pool.close()
