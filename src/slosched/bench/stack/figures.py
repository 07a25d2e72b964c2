"""What one workload of ``slosched bench stack`` yields; the runs make it, the report reads it."""

from __future__ import annotations

from dataclasses import dataclass

from slosched.bench.stack.setup import Sizes, StackWorkload
from slosched.evaluation.scoreboard import Scoreboard


@dataclass(slots=True)
class WorkloadRun:
    """One workload's scoreboard and what it cost."""

    workload: StackWorkload
    sizes: Sizes
    board: Scoreboard
    wall_s: float
