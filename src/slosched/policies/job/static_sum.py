"""Job policy ``static-sum``: vLLM-SP's static job priority — the sum of per-request estimates, fixed
when the job's stage is released (lower runs sooner), with ordering ``static-priority``.

A request's estimate is its service time alone on a generic instance: a prefill of its prompt plus
(predicted output - 1) single-request decode steps, read off a linear step-time belief that has seen no
steps yet (``perf.linear`` prior, an offline profile; the job layer sees no instance's learned model).
Every request of the stage gets the whole sum, so one relQuery is scheduled as a unit and shorter
relQueries go first. Budgets are set as ``deadline`` sets them.
"""

from __future__ import annotations

from collections.abc import Sequence

from slosched.core.request import Request
from slosched.core.views import JobView, StageDecision
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.job.base import JOB_POLICIES
from slosched.policies.registry import NoParams, PolicyContext


class StaticSumPriority:
    def __init__(self) -> None:
        self._predictor = LinearStepPredictor()

    def request_estimate_s(self, request: Request) -> float:
        predict = self._predictor.predict_s
        prefill_s = predict(request.prompt_tokens, 0, 0, 0)
        decode_step_s = predict(0, 0, 1, request.prompt_tokens)
        return prefill_s + max(request.predicted_output_tokens - 1.0, 0.0) * decode_step_s

    def decide(self, job: JobView, requests: Sequence[Request], now_s: float) -> StageDecision:
        total = sum(self.request_estimate_s(request) for request in requests)
        return StageDecision(budget_s=job.deadline_s - now_s, priority=total)


@JOB_POLICIES.register("static-sum", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> StaticSumPriority:
    return StaticSumPriority()
