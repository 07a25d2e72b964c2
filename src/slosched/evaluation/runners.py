"""Run independent evaluation tasks in local worker processes or on a Ray cluster, with a rich progress bar
on stderr.

Results come back in task order whatever order they finish in, so a scoreboard or a sweep never depends on
scheduling or on where it ran. ``SLOSCHED_BENCH_WORKERS`` overrides the local worker count (1: in-process,
e.g. under a profiler). Ray is reached the one way the tuner reaches it too (``tuning.executors``).
``SLOSCHED_TASK_CACHE=DIR`` keeps each finished task's result, so a stopped bench resumes (``task_cache.py``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from datetime import timedelta
from typing import Any, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from slosched.core.errors import ConfigError, Interrupted
from slosched.evaluation.task_cache import TALLY, task_cache
from slosched.tuning.executors import connect_ray, ignore_sigint, kill_workers, ray_map

# How often a run whose stderr is no terminal logs its progress (``LoggedProgress``).
LOG_EVERY_S = 60.0
TaskT = TypeVar("TaskT")
ResultT = TypeVar("ResultT")


WORKERS_ENV = "SLOSCHED_BENCH_WORKERS"


def worker_count(default: int) -> int:
    """Local worker processes: ``SLOSCHED_BENCH_WORKERS`` when set (a whole number >= 1; anything else is a
    ``ConfigError`` naming it, before any run: a typo silently running a multi-hour bench on the default count
    is worse than an error), else ``default`` (at least 1)."""
    text = os.environ.get(WORKERS_ENV, "").strip()
    if not text:
        return max(1, default)
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(WORKERS_ENV, f"must be a whole number of worker processes >= 1, got {text!r}")
    return int(text)


def progress_bar() -> Progress:
    """A rich progress bar on stderr; where stderr is no terminal (a bench left running in the background, a
    CI log) rich draws nothing at all, so a plain line a minute says how far it got instead."""
    console = Console(stderr=True)
    if not console.is_terminal:
        return LoggedProgress(console)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, console=console, transient=True)


class LoggedProgress(Progress):
    """Progress without a live display: ``advance`` prints ``description: done/total (elapsed)`` to stderr each
    time ``every_s`` seconds have passed since a task's last line (or its start), and once more when a task
    that logged completes; a task shorter than ``every_s`` stays silent, as a transient bar would."""

    def __init__(self, console: Console, every_s: float = LOG_EVERY_S) -> None:
        super().__init__(TextColumn("{task.description}"), console=console, disable=True)
        self.every_s = every_s
        self._last_line_s: dict[TaskID, float] = {}
        self._logged: set[TaskID] = set()

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        task = next(task for task in self.tasks if task.id == task_id)
        now = time.monotonic()
        last = self._last_line_s.get(task_id, now - (task.elapsed or 0.0))
        if now - last < self.every_s and not (task.finished and task_id in self._logged):
            return
        self._last_line_s[task_id] = now
        self._logged.add(task_id)
        total = "" if task.total is None else f"/{task.total:g}"
        elapsed = timedelta(seconds=round(task.elapsed or 0.0))
        print(f"{task.description}: {task.completed:g}{total} ({elapsed})", file=sys.stderr, flush=True)


def run_tasks(
    fn: Callable[[TaskT], ResultT],
    tasks: Sequence[TaskT],
    description: str,
    workers: int = 2,
    ray_address: str | None = None,
) -> list[ResultT]:
    """``[fn(task) for task in tasks]`` (``fn`` module-level): on the Ray cluster at ``ray_address`` when
    given, else spread over ``workers`` local processes. Ctrl-C stops at once (workers killed, Ray tasks
    cancelled) and raises ``Interrupted`` whose ``partial`` is the result list with None where a task had
    not finished. With ``SLOSCHED_TASK_CACHE`` set, tasks finished by an earlier run come from the cache and
    each task finished now is written to it as it finishes."""
    cache = task_cache(fn)
    if cache is None:
        return _run_uncached(fn, tasks, description, workers, ray_address)
    keys = [cache.key(task) for task in tasks]
    found = [cache.get(key) for key in keys]
    pending = [index for index, (hit, _) in enumerate(found) if not hit]
    TALLY.from_cache += len(tasks) - len(pending)
    TALLY.run += len(pending)
    slots: list[Any] = [result for _, result in found]

    def record(position: int, result: Any) -> None:
        slots[pending[position]] = result
        cache.put(keys[pending[position]], result)

    try:
        _run_uncached(fn, [tasks[index] for index in pending], description, workers, ray_address, record)
    except Interrupted:
        raise Interrupted(slots) from None
    return slots


def _run_uncached(
    fn: Callable[[TaskT], ResultT],
    tasks: Sequence[TaskT],
    description: str,
    workers: int,
    ray_address: str | None,
    on_result: Callable[[int, ResultT], None] | None = None,
) -> list[ResultT]:
    """``run_tasks`` without the cache; ``on_result(index, result)`` is called as each task finishes."""
    if ray_address is not None:
        results = run_on_ray(fn, tasks, description, ray_address)
        for index, result in enumerate(results):
            if on_result is not None:
                on_result(index, result)
        return results
    workers = worker_count(workers)
    slots: list[Any] = [None] * len(tasks)
    with progress_bar() as progress:
        bar = progress.add_task(description, total=len(tasks))
        if workers == 1 or len(tasks) <= 1:
            try:
                for index, task in enumerate(tasks):
                    slots[index] = fn(task)
                    if on_result is not None:
                        on_result(index, slots[index])
                    progress.advance(bar)
            except KeyboardInterrupt:
                raise Interrupted(slots) from None
            return slots
        # Workers ignore SIGINT (a terminal's Ctrl-C reaches the whole process group): the parent kills them.
        pool = ProcessPoolExecutor(max_workers=min(workers, len(tasks)), initializer=ignore_sigint)
        try:
            futures: dict[Future[ResultT], int] = {pool.submit(fn, task): index for index, task in enumerate(tasks)}
            for future in as_completed(futures):
                slots[futures[future]] = future.result()
                if on_result is not None:
                    on_result(futures[future], slots[futures[future]])
                progress.advance(bar)
        except KeyboardInterrupt:
            kill_workers(pool)
            raise Interrupted(slots) from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return slots


def run_on_ray(fn: Callable[[TaskT], ResultT], tasks: Sequence[TaskT], description: str, address: str) -> list[ResultT]:
    """Each task a Ray task on the cluster at ``address`` (``local`` starts a local Ray instance)."""
    ray = connect_ray(None if address == "local" else address, "--ray")
    with progress_bar() as progress:
        bar = progress.add_task(f"{description} (ray)", total=len(tasks))
        return ray_map(ray, fn, tasks, on_result=lambda: progress.advance(bar))
