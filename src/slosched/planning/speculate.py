"""Run a sequential search on several workers without changing its answer.

A search here is a deterministic function ``plan(results) -> unit | None`` of the run results it has seen: it
replays its decisions from the start and returns the first run it still needs (None: it is done). Run alone
it is the plain sequential search. With ``workers`` processes, the free workers run what ``plan`` would ask
next *if* the runs in flight came back as ``guess`` (for a search over fleets from the cheapest, "does not
carry", the common answer); a speculative run it never asks for is left out of its answer, and one it asks
for later is already done. So the answer, and every run it rests on, is the sequential search's, whatever
the number of workers or the order runs finish in: only the wall time changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import TypeVar

from slosched.core.errors import Interrupted
from slosched.evaluation.runners import progress_bar, run_tasks, worker_count
from slosched.tuning.executors import ignore_sigint, kill_workers

UnitT = TypeVar("UnitT")
TaskT = TypeVar("TaskT")
ResultT = TypeVar("ResultT")


Plan = Callable[[Mapping[UnitT, ResultT]], UnitT | None]


def speculate(
    plan: Plan[UnitT, ResultT],
    task_of: Callable[[UnitT], TaskT],
    run: Callable[[TaskT], ResultT],
    guess: ResultT,
    workers: int,
    ray_address: str | None = None,
    description: str = "search",
) -> dict[UnitT, ResultT]:
    """The results of every run ``plan`` asked for until it returned None (and of speculative runs, which
    ``plan`` ignores). ``run`` is module level (pickled to workers); on Ray, each round's runs are one
    batch. Ctrl-C raises ``Interrupted`` (with no partial results: a search stopped half-way has none)."""
    results: dict[UnitT, ResultT] = {}
    workers = worker_count(workers)
    if ray_address is not None:
        while plan(results) is not None:
            batch = _next_units(plan, results, [], guess, workers)
            found = run_tasks(run, [task_of(unit) for unit in batch], description, workers, ray_address)
            results.update(zip(batch, found, strict=True))
        return results
    with progress_bar() as progress:
        bar = progress.add_task(f"{description}: runs", total=None)
        try:
            if workers == 1:
                while (unit := plan(results)) is not None:
                    results[unit] = run(task_of(unit))
                    progress.advance(bar)
            else:
                _on_pool(plan, task_of, run, guess, workers, results, lambda: progress.advance(bar))
        except KeyboardInterrupt:
            raise Interrupted(None) from None
    return results


def _on_pool(
    plan: Plan[UnitT, ResultT],
    task_of: Callable[[UnitT], TaskT],
    run: Callable[[TaskT], ResultT],
    guess: ResultT,
    workers: int,
    results: dict[UnitT, ResultT],
    advance: Callable[[], None],
) -> None:
    """``speculate`` on local worker processes, each refilled as soon as it finishes; ``results`` filled."""
    pool = ProcessPoolExecutor(max_workers=workers, initializer=ignore_sigint)
    flying: dict[Future[ResultT], UnitT] = {}
    try:
        while plan(results) is not None:
            for unit in _next_units(plan, results, list(flying.values()), guess, workers):
                flying[pool.submit(run, task_of(unit))] = unit
            done, _ = wait(flying, return_when=FIRST_COMPLETED)
            for future in done:
                results[flying.pop(future)] = future.result()
                advance()
    finally:
        # Speculative runs still going are not needed (or Ctrl-C): stop them rather than wait for them.
        kill_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)


def _next_units(
    plan: Plan[UnitT, ResultT],
    results: Mapping[UnitT, ResultT],
    flying: list[UnitT],
    guess: ResultT,
    workers: int,
) -> list[UnitT]:
    """Units to start now: what ``plan`` asks next with the runs in flight (and those picked here) assumed
    to return ``guess``, until ``workers`` are busy. The first is always the run ``plan`` needs now (the
    replay reaches it on real results alone)."""
    picked: list[UnitT] = []
    while len(flying) + len(picked) < workers:
        assumed = {**results, **{unit: guess for unit in (*flying, *picked)}}
        unit = plan(assumed)
        if unit is None or unit in flying or unit in picked:
            break
        picked.append(unit)
    return picked
