"""Admission ``static-concurrency``: at most ``cap`` requests run at once (SABER's baseline, a fixed
max-concurrency setting such as a client-side semaphore or vLLM's ``max_num_seqs``).

Invariant: running requests plus those admitted earlier in the same pass never exceed ``cap``. The
decision changes only when the queues change, so the part is time-invariant; once the cap is reached the pass
ends (``pass_closed``).
"""

from __future__ import annotations

from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.core.views import EngineView, SeqView
from slosched.policies.engine.admission.admission_pass import AdmissionPass
from slosched.policies.engine.base import ADMISSIONS
from slosched.policies.registry import PolicyContext, setting


@dataclass(frozen=True, slots=True)
class StaticConcurrencyParams:
    cap: int | None = setting(None, "required: the maximum number of running requests (>= 1)")

    def __post_init__(self) -> None:
        check_cap(self.cap)


def check_cap(cap: int | None) -> int:
    if cap is None:
        raise ConfigError("static-concurrency.cap", "required: the maximum number of running requests (>= 1)")
    if cap < 1:
        raise ConfigError("static-concurrency.cap", f"must be >= 1, got {cap}")
    return cap


class StaticConcurrencyAdmission:
    time_invariant = True

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._pass = AdmissionPass()

    def admit(self, seq: SeqView, engine: EngineView) -> bool:
        state = self._pass
        state.begin_if_new(seq, engine)
        if engine.num_running + state.admitted >= self.cap:
            return False
        state.admitted += 1
        return True

    def pass_closed(self, engine: EngineView) -> bool:
        """The cap is reached: every later call of this pass would be held back too (``queue.ClosesPass``).
        Why: under overload a pass walked thousands of waiting calls to admit none; the screening runs of the
        capped baselines on the code workload at 2x-3x capacity took minutes each (py-spy, 2026-12-07)."""
        return engine.num_running + self._pass.admitted >= self.cap


@ADMISSIONS.register("static-concurrency", params=StaticConcurrencyParams)
def build(params: StaticConcurrencyParams, context: PolicyContext) -> StaticConcurrencyAdmission:
    return StaticConcurrencyAdmission(check_cap(params.cap))
