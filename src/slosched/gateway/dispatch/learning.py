"""What the dispatcher learns from a completed call: latency metrics, the output-length belief, the router's
completion feedback, the backend's step-time belief, and SLO attainment counters."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from slosched.core.request import Outcome
from slosched.core.views import StepObservation
from slosched.gateway.calls.call import Call

if TYPE_CHECKING:
    from slosched.gateway.dispatch.dispatcher import Attempt, Dispatcher


def learn(dispatcher: Dispatcher, call: Call, attempt: Attempt, now: float) -> None:
    request, seq, backend = call.request, attempt.seq, attempt.backend
    latency = now - request.arrival_s
    metrics = dispatcher.metrics
    labels = (backend.name, backend.config.model, metrics.tenant_label(request.tenant))
    metrics.labelled(metrics.request_latency, *labels).observe(latency)
    if seq.first_token_s is not None:
        metrics.labelled(metrics.ttft, *labels).observe(seq.first_token_s - request.arrival_s)
    if call.output_tokens > 0:
        dispatcher.context.output_predictor.observe(request, call.output_tokens)
    observer = dispatcher._observer
    if observer is not None:
        observer.on_request_finished(attempt.queue.index, request, latency, now)
    if call.output_tokens >= 2:
        if call.stream and seq.first_token_s is not None:
            decode_s = (now - seq.first_token_s) / (call.output_tokens - 1)
            metrics.labelled(metrics.tpot, *labels).observe(decode_s)  # as vLLM: streamed calls only
        else:  # one body at the end: the per-token time includes prefill, so it errs slow
            decode_s = (now - attempt.sent_s) / call.output_tokens
        batch = max(attempt.queue.num_running, 1)
        context = batch * (request.prompt_tokens + call.output_tokens // 2)
        dispatcher.predictors[attempt.queue.index].observe(StepObservation(0, 0, batch, context, (decode_s,)))
    count_slo(dispatcher, call, now)


def count_slo(dispatcher: Dispatcher, call: Call, now: float) -> None:
    """One result per SLO the call declared (end-to-end deadline, TTFT, TPOT of a stream)."""
    request, metrics = call.request, dispatcher.metrics
    if not math.isfinite(request.deadline_s) and request.ttft_slo_s is None and request.tpot_slo_s is None:
        return  # the common case: no SLO
    tenant, priority = metrics.tenant_label(request.tenant), request.priority
    if math.isfinite(request.deadline_s):
        metrics.slo_result(now, "deadline", now <= request.deadline_s, tenant, priority)
    if request.ttft_slo_s is not None and call.first_token_s is not None:
        met = call.first_token_s - request.arrival_s <= request.ttft_slo_s
        metrics.slo_result(now, "ttft", met, tenant, priority)
    if request.tpot_slo_s is not None and call.stream and call.first_token_s is not None and call.output_tokens >= 2:
        tpot = (now - call.first_token_s) / (call.output_tokens - 1)
        metrics.slo_result(now, "tpot", tpot <= request.tpot_slo_s, tenant, priority)


def observe_finish(dispatcher: Dispatcher, call: Call, outcome: Outcome, attempt: Attempt | None, now: float) -> None:
    """What every finished call adds beyond its outcome: tokens of a forwarded call (a cancelled or failed
    one used the backend too), and a missed result for each SLO a rejected or failed call declared (a
    client that left is no verdict on the gateway). Completed calls count their SLOs in ``learn``."""
    request, metrics = call.request, dispatcher.metrics
    if attempt is not None:
        labels = (attempt.backend.config.model, metrics.tenant_label(request.tenant))
        metrics.labelled(metrics.prompt_tokens, *labels).inc(request.prompt_tokens)
        if call.output_tokens:
            metrics.labelled(metrics.generation_tokens, *labels).inc(call.output_tokens)
    if outcome is Outcome.REJECTED or outcome is Outcome.FAILED:
        tenant, priority = metrics.tenant_label(request.tenant), request.priority
        kinds = (("deadline", math.isfinite(request.deadline_s)), ("ttft", request.ttft_slo_s is not None),
                 ("tpot", request.tpot_slo_s is not None and call.stream))  # fmt: skip
        for kind, declared in kinds:
            if declared:
                metrics.slo_result(now, kind, False, tenant, priority)
