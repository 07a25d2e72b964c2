"""Run independent benchmark tasks in local worker processes with a rich progress bar on stderr.

Results come back in task order whatever order they finish in, so a scoreboard never depends on
scheduling. ``SLOSCHED_BENCH_WORKERS`` overrides the worker count (1: in-process, e.g. under a profiler).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

TaskT = TypeVar("TaskT")
ResultT = TypeVar("ResultT")


def worker_count(default: int) -> int:
    text = os.environ.get("SLOSCHED_BENCH_WORKERS")
    return max(1, int(text)) if text and text.isdigit() else max(1, default)


def run_tasks(
    fn: Callable[[TaskT], ResultT], tasks: Sequence[TaskT], description: str, workers: int = 2
) -> list[ResultT]:
    """``[fn(task) for task in tasks]``, spread over ``workers`` processes (``fn`` module-level)."""
    workers = worker_count(workers)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        bar = progress.add_task(description, total=len(tasks))
        if workers == 1 or len(tasks) <= 1:
            results = []
            for task in tasks:
                results.append(fn(task))
                progress.advance(bar)
            return results
        slots: list[Any] = [None] * len(tasks)
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
            futures: dict[Future[ResultT], int] = {pool.submit(fn, task): index for index, task in enumerate(tasks)}
            for future in as_completed(futures):
                slots[futures[future]] = future.result()
                progress.advance(bar)
        return slots
