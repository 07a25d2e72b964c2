"""Step 5 of the scoreboard (``scoreboard.py``): every row's runs at fixed multiples of the strongest baseline's
capacity, the baselines screened as their searches are, and a saved board's rows measured again beside the
baselines' kept runs."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slosched.evaluation.board import CapacityResult, Checkpoint, LoadRuns, Scoreboard
from slosched.evaluation.runners import run_tasks
from slosched.evaluation.screening import contenders
from slosched.evaluation.steady import steady_jobs
from slosched.evaluation.workbench import Candidate, RunFigures, Workbench

# Overload runs between two checkpoints: about 5 minutes of a slow workload's runs on two workers.
CHECKPOINT_RUNS = 50


@dataclass(slots=True, frozen=True)
class _RunTask:
    workbench: Workbench
    candidate: Candidate
    rate: float
    seed: int


def _run_task(task: _RunTask) -> RunFigures:
    return task.workbench.run(task.candidate, task.rate, task.seed)


def others_overload(
    workbench: Workbench,
    board: Scoreboard,
    chosen: Sequence[str],
    loads: Sequence[float],
    workers: int,
    keep: bool,
    checkpoint: Checkpoint | None = None,
) -> None:
    """Step 5 for ``chosen`` (the non-baseline rows), recorded on the board. With ``keep``, the baselines' runs
    the board holds at ``loads`` stay and only ``chosen``'s and the strongest's are made: a baseline's run
    depends on its code, the seed and the strongest's capacity (which sizes every run), not on the other rows.
    The check that the kept runs are still what the code gives: every baseline is run again on the first seed
    at the highest load, and the strongest at every load; where one run differs, every baseline runs again."""
    seeds = board.seeds
    if keep and board.baselines_run_at(loads):
        top = max(loads)  # the same job counts as the full set of loads (``overload_runs``)
        check = overload_runs(workbench, board, list(board.baselines), seeds[:1], [top], workers)
        stale = [label for label in board.baselines if board.kept_run_differs(label, top, check[label][top][0])]
        runs = {} if stale else overload_runs(workbench, board, chosen, seeds, loads, workers)
        strongest_runs = runs.get(board.strongest, {})
        stale += [f"{board.strongest} at {load}x" for load in board.runs_differ(board.strongest, strongest_runs)]
        if not stale:
            board.forget_overload(keep=list(board.baselines))
            board.record_overload(runs, [board.strongest, *chosen])
            return
        print(
            f"warning: {workbench.name}: kept baseline runs differ from fresh ones ({', '.join(stale[:4])}"
            f"{', ...' if len(stale) > 4 else ''}); every baseline runs again",
            file=sys.stderr,
            flush=True,
        )
    runs = overload_runs(workbench, board, [*chosen, *board.baselines], seeds, loads, workers, True, checkpoint)
    board.forget_overload()
    board.record_overload(runs, [board.strongest, *chosen])
    board.overload_done = {}


def overload_runs(
    workbench: Workbench,
    board: Scoreboard,
    labels: Sequence[str],
    seeds: Sequence[int],
    loads: Sequence[float],
    workers: int = 2,
    screened: bool = False,
    checkpoint: Checkpoint | None = None,
) -> LoadRuns:
    """The runs of the strongest baseline and ``labels`` at ``loads`` x the strongest baseline's capacity, one
    per seed (``Scoreboard.record_overload`` turns them into the overload figures); none when that
    capacity is 0. ``screened``: the baselines other than the strongest run on the first seed, and go on to
    the others only where their goodput at some load could make them the strongest at that load
    (``screening.py``); the rest keep one run per load. ``checkpoint``: the runs are kept in
    ``board.overload_done`` as they finish, a batch at a time, and the board handed over after each batch;
    runs already there are not made again (a resumed step)."""
    every = {**board.baselines, **board.others}
    chosen = [board.strongest, *dict.fromkeys(label for label in labels if label != board.strongest)]
    base_rate = board.capacity_of(board.strongest)
    if not base_rate > 0:
        return {}
    # Each seed's runs at every load replay one job count: what the highest load needs (common random numbers).
    sized = {seed: workbench.sized(steady_jobs(workbench, seed, max(loads) * base_rate)) for seed in seeds}

    def run(keys: Sequence[tuple[str, float, int]]) -> dict[tuple[str, float, int], RunFigures]:
        if checkpoint is None:
            return _overload_batch(workbench, keys, every, sized, base_rate, workers)
        made = board.overload_done  # this step's runs so far, kept on the board that the checkpoint saves
        missing = [key for key in keys if key not in made]
        for start in range(0, len(missing), CHECKPOINT_RUNS):
            made.update(
                _overload_batch(workbench, missing[start : start + CHECKPOINT_RUNS], every, sized, base_rate, workers)
            )
            checkpoint(board)
        return {key: made[key] for key in keys}

    screened = screened and len(seeds) > 1
    screen = [label for label in chosen if screened and label in board.baselines and label != board.strongest]
    every_seed = [label for label in chosen if label not in screen]
    done = run([(label, load, seed) for label in every_seed for load in loads for seed in seeds])
    done.update(run([(label, load, seeds[0]) for label in screen for load in loads]))
    promoted: set[str] = set()
    for load in loads:  # a contender at any load runs on every seed at every load
        goodput = {label: done[(label, load, seeds[0])].goodput_jobs_per_s for label in screen}
        promoted.update(contenders(goodput, done[(board.strongest, load, seeds[0])].goodput_jobs_per_s))
    done.update(
        run([(label, load, seed) for label in screen if label in promoted for load in loads for seed in seeds[1:]])
    )
    return {
        label: {load: [done[(label, load, seed)] for seed in seeds if (label, load, seed) in done] for load in loads}
        for label in chosen
    }


def _overload_batch(
    workbench: Workbench,
    keys: Sequence[tuple[str, float, int]],
    every: Mapping[str, CapacityResult],
    sized: Mapping[int, Workbench],
    base_rate: float,
    workers: int,
) -> dict[tuple[str, float, int], RunFigures]:
    """The overload runs of ``keys`` (label, load, seed), the load a multiple of ``base_rate``."""
    tasks = [_RunTask(sized[seed], every[label].candidate, load * base_rate, seed) for label, load, seed in keys]
    return dict(zip(keys, run_tasks(_run_task, tasks, f"{workbench.name}: overload runs", workers), strict=True))
