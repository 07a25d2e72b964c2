"""Where simulation candidates run: in-process, in local worker processes, or on a Ray cluster.

An executor maps a picklable module-level function over picklable items and returns the results in item
order (whatever order they finish in), so a tuner's choice never depends on the executor.
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Protocol, TypeVar

from slosched.core.errors import ConfigError, Interrupted

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")
EXECUTOR_NAMES = ("serial", "process", "ray")


class CandidateExecutor(Protocol):
    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]: ...

    def close(self) -> None: ...


class SerialExecutor:
    """In the calling process (tests, tiny windows)."""

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        return [fn(item) for item in items]

    def close(self) -> None:
        return None


class ProcessExecutor:
    """A pool of local worker processes, started on first use and kept until ``close`` (start-up costs
    more than a small window's simulation, so a tuner reuses it across retunes). Ctrl-C during ``map`` kills
    the workers at once (they ignore SIGINT themselves) and closes the pool before it propagates."""

    def __init__(self, max_workers: int | None = None) -> None:
        self.max_workers = max_workers or max(1, os.cpu_count() or 1)
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        if len(items) <= 1 or self.max_workers == 1:
            return [fn(item) for item in items]
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.max_workers, initializer=ignore_sigint)
        try:
            return list(self._pool.map(fn, items))
        except KeyboardInterrupt:
            kill_workers(self._pool)
            self.close()
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


def ignore_sigint() -> None:
    """A worker's initializer: a terminal's Ctrl-C reaches the whole process group, and the parent alone
    decides (and kills its workers), so no worker prints a traceback or finishes a task nobody will read."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def kill_workers(pool: ProcessPoolExecutor) -> None:
    """Stop the pool's processes now (Python 3.14 has ``terminate_workers``; before, the attribute)."""
    terminate = getattr(pool, "terminate_workers", None)
    if terminate is not None:
        terminate()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()


def check_ray_address(address: str, field: str, timeout_s: float = 5.0) -> None:
    """``HOST:PORT`` (or ``ray://HOST:PORT``) must take a TCP connection within ``timeout_s``: ``ray.init``
    on an unreachable address retries for minutes printing warnings. ``auto`` and ``local`` pass."""
    if address in ("auto", "local"):
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(field, f"expected HOST:PORT, ray://HOST:PORT, 'auto' or 'local', got {address[:64]!r}")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise ConfigError(field, f"cannot reach a Ray cluster at {address[:64]!r}: {reason}") from None


def connect_ray(address: str | None, field: str, num_cpus: int | None = None) -> Any:
    """The ``ray`` module, initialised: a cluster at ``address`` (``"auto"``, ``"ray://host:port"``), or a
    local instance for None. Errors name ``field`` (the option the user set). Shared with ``slosched sweep``."""
    try:
        ray: Any = importlib.import_module("ray")
    except ImportError as error:
        raise ConfigError(field, "needs the ray extra: pip install 'slosched[ray]'") from error
    if not ray.is_initialized():
        if address is not None:
            check_ray_address(address, field)
        try:
            ray.init(address=address, num_cpus=num_cpus, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise ConfigError(field, f"cannot reach a Ray cluster at {address!r}: {error}") from error
    return ray


def ray_map(
    ray: Any, fn: Callable[[ItemT], ResultT], items: Sequence[ItemT], on_result: Callable[[], None] | None = None
) -> list[ResultT]:
    """``fn`` over ``items`` as Ray tasks, results in item order; ``on_result`` after each one arrives
    (a progress bar)."""
    remote = ray.remote(fn)
    pending = {remote.remote(item): index for index, item in enumerate(items)}
    slots: list[Any] = [None] * len(items)
    waiting = list(pending)
    try:
        while waiting:
            done, waiting = ray.wait(waiting, num_returns=1)
            for ref in done:
                slots[pending[ref]] = ray.get(ref)
                if on_result is not None:
                    on_result()
    except KeyboardInterrupt:
        for ref in waiting:  # Ctrl-C: the cluster stops too, not only this driver
            ray.cancel(ref, force=True)
        raise Interrupted(slots) from None
    return slots


class RayExecutor:
    """Each candidate a Ray task (``pip install slosched[ray]``). ``address`` None starts or joins a local
    Ray instance; ``"auto"`` or ``"ray://host:port"`` joins a cluster."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None) -> None:
        self._ray = connect_ray(address, "executor", num_cpus)

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        return ray_map(self._ray, fn, items)

    def close(self) -> None:
        return None  # the Ray runtime may be shared with other users in this process


def make_executor(name: str, max_workers: int | None = None, address: str | None = None) -> CandidateExecutor:
    """``serial``, ``process`` (local workers) or ``ray``."""
    if name == "serial":
        return SerialExecutor()
    if name == "process":
        return ProcessExecutor(max_workers)
    if name == "ray":
        return RayExecutor(address, max_workers)
    raise ConfigError("executor", f"got {name!r}; allowed: {', '.join(EXECUTOR_NAMES)}")
