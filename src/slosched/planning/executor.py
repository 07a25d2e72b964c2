"""Where a sweep's capacity searches run: local worker processes (default) or a Ray cluster.

Both return results in task order, whatever order they finish in, so a sweep's answer never depends on
where it ran; both show a rich progress bar on stderr.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from slosched.bench.scoreboard_runner import run_tasks
from slosched.core.errors import ConfigError

TaskT = TypeVar("TaskT")
ResultT = TypeVar("ResultT")


def run_on_ray(fn: Callable[[TaskT], ResultT], tasks: Sequence[TaskT], description: str, address: str) -> list[ResultT]:
    """Each task a Ray task on the cluster at ``address`` (``local`` starts a local Ray instance)."""
    try:
        ray: Any = importlib.import_module("ray")
    except ImportError as error:
        raise ConfigError("--ray", "needs the ray extra: pip install 'slosched[ray]'") from error
    if not ray.is_initialized():
        try:
            ray.init(address=None if address == "local" else address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise ConfigError("--ray", f"cannot reach a Ray cluster at {address!r}: {error}") from error
    remote = ray.remote(fn)
    pending = {remote.remote(task): index for index, task in enumerate(tasks)}
    slots: list[Any] = [None] * len(tasks)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        bar = progress.add_task(f"{description} (ray)", total=len(tasks))
        waiting = list(pending)
        while waiting:
            done, waiting = ray.wait(waiting, num_returns=1)
            for ref in done:
                slots[pending[ref]] = ray.get(ref)
                progress.advance(bar)
    return slots


def run_sweep_tasks(
    fn: Callable[[TaskT], ResultT], tasks: Sequence[TaskT], description: str, workers: int, ray_address: str | None
) -> list[ResultT]:
    if ray_address is not None:
        return run_on_ray(fn, tasks, description, ray_address)
    return run_tasks(fn, tasks, description, workers)
