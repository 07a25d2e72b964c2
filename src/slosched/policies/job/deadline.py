"""Job policy ``deadline``: every call may use all the time the job has left (budget = deadline - now)."""

from __future__ import annotations

from collections.abc import Sequence

from slosched.core.request import Request
from slosched.core.views import JobView, StageDecision
from slosched.policies.job.base import JOB_POLICIES
from slosched.policies.registry import NoParams, PolicyContext


class DeadlineBudget:
    def decide(self, job: JobView, requests: Sequence[Request], now_s: float) -> StageDecision:
        return StageDecision(budget_s=job.deadline_s - now_s)


@JOB_POLICIES.register("deadline", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> DeadlineBudget:
    return DeadlineBudget()
