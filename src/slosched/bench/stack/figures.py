"""What one workload of ``slosched bench stack`` yields; the runs make it, the report reads it."""

from __future__ import annotations

import resource
from dataclasses import dataclass

from slosched.bench.stack.setup import Sizes, StackWorkload
from slosched.evaluation.judgement import JUDGEMENT_NAME
from slosched.evaluation.scoreboard import Scoreboard


@dataclass(slots=True)
class WorkloadRun:
    """One workload's scoreboard and what it cost (wall and CPU seconds, its worker processes included)."""

    workload: StackWorkload
    sizes: Sizes
    board: Scoreboard
    wall_s: float
    cpu_s: float = float("nan")
    loaded: bool = False  # read from a saved part (``parts.py``), not measured by this process
    # (wall, CPU) seconds this process spent on a loaded part (loads added, the stack measured again:
    # ``refresh.py``): in wall_s / cpu_s, and in this run's own
    topped_up: tuple[float, float] = (0.0, 0.0)
    # How its runs were judged (``evaluation/judgement.JUDGEMENT_NAME``): a part judged another way is measured
    # again (``parts.py``); one saved before the name was kept lacks the slot and reads as None.
    judgement: str | None = JUDGEMENT_NAME


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished workers (wall time on an idle machine is about this over
    the worker count, whatever else shares the machine)."""
    own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime
