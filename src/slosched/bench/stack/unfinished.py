"""A ``bench stack`` part measured over several sittings, on machines that need not survive between them.

A whole part takes longer than a working session on two cores (mixed: about 4 h, code: about 5 h), and the
task cache (``evaluation/task_cache.py``) that lets a stopped run resume lives on the machine's disk: a
machine that does not come back loses it all. With ``SLOSCHED_STACK_PARTS=DIR``, the part being measured is
saved as ``DIR/{quick|full}-NAME.unfinished.pkl`` after each step of the scoreboard (``scoreboard.evaluate``:
each baseline round's searches, the stack's capacities, their 4x runs, and each batch of overload runs); a run
that finds it goes on from the step after it, to the figures an uninterrupted run gives. The file is small (the
board and the overload runs' figures, not their records), so it can be kept with the finished parts.

A resumed part must come from the same code and environment: the file carries the environment the task cache
keys on (every package file, the Python and distribution versions), and one saved in another is ignored, the
run saying what differs (a distribution's version, the package's files) and measuring the part whole. Resume a
part from a worktree at the commit that began it, with the distributions it names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from slosched.bench.stack.figures import WorkloadRun
from slosched.bench.stack.parts import read_saved, why_not_reused, write_atomically
from slosched.bench.stack.setup import StackWorkload
from slosched.evaluation import run_environment
from slosched.evaluation.board import Scoreboard


@dataclass(slots=True)
class Unfinished:
    """A part's board part-way through its measurement, the time spent on it so far, and the code and
    environment it was measured in."""

    run: WorkloadRun
    environment: run_environment.Environment


def unfinished_path(directory: Path, name: str, quick: bool) -> Path:
    return directory / f"{'quick' if quick else 'full'}-{name}.unfinished.pkl"


def save_unfinished(directory: Path, run: WorkloadRun, *, quick: bool) -> None:
    """Write ``run`` (its board part-way) atomically, with this code's environment."""
    write_atomically(unfinished_path(directory, run.workload.name, quick), Unfinished(run, run_environment.current()))


def load_unfinished(directory: Path, workload: StackWorkload, quick: bool, seeds: Sequence[int]) -> WorkloadRun | None:
    """The unfinished part of ``workload`` to resume (same code and environment, mode, seeds, sizes and
    judgement), or None; one that cannot be resumed is announced (why) and left to be overwritten."""
    path = unfinished_path(directory, workload.name, quick)
    saved = read_saved(path, Unfinished, "unfinished bench stack part")
    if saved is None:
        return None
    why = why_not_reused(saved.run, workload, quick, seeds)
    here = run_environment.current()
    if why is None and saved.environment.digest != here.digest:
        changes = "; ".join(run_environment.differences(saved.environment, here)) or "another environment"
        why = f"measured in another environment: {changes}; resume it from the commit that began it"
    if why:
        print(f"{workload.name}: the unfinished part {path} is not resumed ({why}): measured whole", flush=True)
        return None
    print(f"{workload.name}: resumed from {path} ({_progress(saved.run.board)})", flush=True)
    return replace(saved.run, workload=workload)


def discard_unfinished(directory: Path, name: str, quick: bool) -> None:
    unfinished_path(directory, name, quick).unlink(missing_ok=True)


def _progress(board: Scoreboard) -> str:
    steps = [f"{len(board.baselines)} baselines"]
    if board.others:
        steps.append(", ".join(board.others))
    if set(board.converged()) - set(board.baselines):
        steps.append("their 4x runs")
    if board.overload_done:
        steps.append(f"{len(board.overload_done)} overload runs")
    return ", ".join(steps) + " measured"
