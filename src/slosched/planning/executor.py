"""Where a sweep's capacity searches run: local worker processes (default) or a Ray cluster.

Both return results in task order, whatever order they finish in, so a sweep's answer never depends on
where it ran; both show a rich progress bar on stderr.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from slosched.bench.scoreboard_runner import run_tasks
from slosched.tuning.executors import connect_ray, ray_map

TaskT = TypeVar("TaskT")
ResultT = TypeVar("ResultT")


def run_on_ray(fn: Callable[[TaskT], ResultT], tasks: Sequence[TaskT], description: str, address: str) -> list[ResultT]:
    """Each task a Ray task on the cluster at ``address`` (``local`` starts a local Ray instance)."""
    ray = connect_ray(None if address == "local" else address, "--ray")
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        bar = progress.add_task(f"{description} (ray)", total=len(tasks))
        return ray_map(ray, fn, tasks, on_result=lambda: progress.advance(bar))


def run_sweep_tasks(
    fn: Callable[[TaskT], ResultT], tasks: Sequence[TaskT], description: str, workers: int, ray_address: str | None
) -> list[ResultT]:
    if ray_address is not None:
        return run_on_ray(fn, tasks, description, ray_address)
    return run_tasks(fn, tasks, description, workers)
