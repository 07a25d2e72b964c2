"""What one mix of ``slosched bench saber`` yields: its scoreboard, the paper's baseline and SLAs, and the
paper's table rows; the runs make it, the report reads it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import slosched.bench.saber.setup as setup
from slosched.evaluation.scoreboard import Scoreboard


@dataclass(slots=True)
class MixResult:
    mix: str
    board: Scoreboard
    paper_baseline: str
    sla: dict[str, float]
    rows: list[dict[str, Any]] = field(default_factory=list)

    def ratios(self) -> dict[str, float]:
        return {
            "ratio_vs_strongest": self.board.ratio(setup.PAPER_POLICY),
            "ratio_vs_paper_baseline": self.board.ratio(setup.PAPER_POLICY, self.paper_baseline),
        }
