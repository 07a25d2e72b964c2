"""Hexgen-Text2SQL's cost model (DESIGN 4.1), shared by the ``workload-balanced`` router, the ``urgency``
ordering and the ``stage-budget`` job policy.

``t_comp(q, m) = prefill_m(L_in(q)) + decode_m(L_out_pred(q))`` from instance m's *belief* step-time model
(a ``StepPredictor``) and the request's *predicted* output length; never the true length. Decode is costed
as ``L_out - 1`` single-sequence steps (the prefill step emits the first token) at the mean context
length of the generation. Results are seconds, >= 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from slosched.core.belief import StepPredictor
from slosched.core.request import Request
from slosched.core.views import InstanceView


def t_comp_s(prompt_tokens: int, predicted_output_tokens: float, predictor: StepPredictor) -> float:
    """Belief: seconds to serve one call alone on the instance ``predictor`` models."""
    prefill_s = predictor.predict_s(max(prompt_tokens, 1), 0, 0, 0)
    steps = max(predicted_output_tokens - 1.0, 0.0)
    if steps <= 0.0:
        return prefill_s
    mean_context = int(prompt_tokens + steps / 2.0)
    return prefill_s + steps * predictor.predict_s(0, 0, 1, mean_context)


def request_t_comp_s(request: Request, predictor: StepPredictor) -> float:
    return t_comp_s(request.prompt_tokens, request.predicted_output_tokens, predictor)


def t_queue_s(instance: InstanceView) -> float:
    """Belief: work already dispatched to ``instance`` and not finished, in seconds of its time.

    The sum of ``t_comp`` over its queued (not yet admitted) requests, plus the predicted decode tokens
    its running requests still owe at the single-sequence decode step time. The running part is counted
    because an engine with continuous batching admits eagerly: without it, an instance that admitted a
    dozen long generations would look idle to the router.
    """
    predictor = instance.step_predictor
    waiting: Sequence[Request] = instance.waiting_requests
    queued_s = 0.0
    queued_decode_tokens = 0.0
    for request in waiting:
        queued_s += request_t_comp_s(request, predictor)
        queued_decode_tokens += max(request.predicted_output_tokens, 1.0)
    running_tokens = max(instance.outstanding_decode_tokens - queued_decode_tokens, 0.0)
    if running_tokens > 0.0:
        queued_s += running_tokens * predictor.predict_s(0, 0, 1, 0)
    return queued_s
