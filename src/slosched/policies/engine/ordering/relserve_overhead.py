"""Time spent inside RelServe's Dynamic Priority Updater and Adaptive Batch Arranger.

Measured with ``time.perf_counter`` around the policies' own computation, only to report their overhead;
no decision ever reads it. One meter may be shared by the policies of every instance of a run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class OverheadMeter:
    """``dpu_s``/``aba_s``: wall seconds inside priority updates and batch arrangement (ABA excludes the
    DPU refresh it triggers); ``num_iterations``: engine steps the arranger planned."""

    dpu_s: float = 0.0
    aba_s: float = 0.0
    num_dpu_updates: int = 0
    num_iterations: int = 0

    @property
    def total_s(self) -> float:
        return self.dpu_s + self.aba_s

    def us_per_iteration(self) -> float:
        return 1e6 * self.total_s / self.num_iterations if self.num_iterations else 0.0
