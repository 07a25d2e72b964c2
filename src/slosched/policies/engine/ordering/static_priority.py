"""Ordering ``static-priority``: shortest estimated work first, estimate fixed when the request arrives.

The estimate is the belief step-time model's prefill time for the prompt plus predicted output tokens
times the single-request decode step time; a job-level ``request.priority`` (set by a job-aware layer) wins
when it is non-zero. Keys never change while waiting (vLLM-SP-style static priority).
"""

from __future__ import annotations

from typing import Any

from slosched.core.views import EngineView, SeqView
from slosched.policies.engine.base import ORDERINGS
from slosched.policies.registry import NoParams, PolicyContext


def estimated_service_s(seq: SeqView, engine: EngineView) -> float:
    """Belief: time to serve ``seq`` alone on this engine (prefill + predicted decode)."""
    request = seq.request
    predictor = engine.step_predictor
    prefill_s = predictor.predict_s(request.prompt_tokens, 0, 0, 0)
    decode_step_s = predictor.predict_s(0, 0, 1, request.prompt_tokens)
    return prefill_s + max(request.predicted_output_tokens - 1.0, 0.0) * decode_step_s


class StaticPriorityOrdering:
    static_keys = True
    time_invariant = True

    def __init__(self) -> None:
        self._fixed: dict[str, float] = {}

    def key(self, seq: SeqView, engine: EngineView) -> Any:
        request = seq.request
        estimate = self._fixed.get(request.id)
        if estimate is None:
            estimate = request.priority if request.priority else estimated_service_s(seq, engine)
            self._fixed[request.id] = estimate
        return (estimate, request.arrival_s, request.id)


@ORDERINGS.register("static-priority", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> StaticPriorityOrdering:
    return StaticPriorityOrdering()
