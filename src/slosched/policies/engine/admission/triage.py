"""Admission ``triage``: calls that can still meet their deadline join the batch eagerly; best-effort calls
(demoted by the ``least-slack`` ordering's rule: their job is hopeless, or the call cannot finish before its
job's deadline any more) join only while the batch, with this pass's admissions, holds fewer than
``best_effort_share`` x the instance's max running requests.

Why: under overload a continuous-batching engine admits whatever fits, so late calls share every step with
calls that can still count and slow them all down (the baselines' collapse at 2x load). Holding late
calls to part of the batch keeps them served (never dropped; an idle engine takes them up to the share)
while the feasible calls keep the capacity. The ordering puts every feasible call first, so a pass reaches
a best-effort call only after the feasible ones ahead were admitted or stopped by capacity.

Decisions depend on time through the tier rule, so the part is not time-invariant.
"""

from __future__ import annotations

from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.core.views import EngineView, SeqView
from slosched.policies.engine.admission.admission_pass import AdmissionPass
from slosched.policies.engine.base import ADMISSIONS
from slosched.policies.engine.ordering.least_slack import is_best_effort
from slosched.policies.registry import PolicyContext, setting


@dataclass(frozen=True, slots=True)
class TriageParams:
    best_effort_share: float = setting(0.25, "share of the max running requests best-effort calls may hold, in [0, 1]")

    def __post_init__(self) -> None:
        if not 0.0 <= self.best_effort_share <= 1.0:
            raise ConfigError("triage.best_effort_share", f"must be in [0, 1], got {self.best_effort_share}")


class TriageAdmission:
    time_invariant = False

    def __init__(self, best_effort_share: float) -> None:
        self.best_effort_share = best_effort_share
        self._pass = AdmissionPass()

    def admit(self, seq: SeqView, engine: EngineView) -> bool:
        state = self._pass
        state.begin_if_new(seq, engine)
        if is_best_effort(seq, engine):
            limit = self.best_effort_share * engine.spec.max_running
            if engine.num_running + state.admitted >= limit:
                return False
        state.admitted += 1
        return True


@ADMISSIONS.register("triage", params=TriageParams)
def build(params: TriageParams, context: PolicyContext) -> TriageAdmission:
    return TriageAdmission(params.best_effort_share)
