"""Job-level admission at the gateway: the job policy's decision for a released stage (a direct call with a
deadline is a one-call job's stage, as in the simulator), applied before its calls are queued.

A stage the job layer finds unable to meet its job's deadline (``StageDecision.best_effort``; the stack's
``critical-path`` judges it alone, or through each backend's queue with ``backlog``) is relegated: served
as best effort, after every call that can still count. A client that asked for it (``x-slo-if-infeasible:
reject`` on a call, ``if_infeasible: "reject"`` on a job stage) gets an early 503 ``deadline_infeasible``
instead, before anything is accepted: nothing runs, nothing is lost, and it can retry with a looser
deadline or elsewhere, rather than learn of the miss when the deadline has passed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from slosched.core.job import JobKind
from slosched.core.request import Request
from slosched.core.views import JobView
from slosched.gateway.calls.call import HttpError
from slosched.gateway.dispatch.dispatcher import Dispatcher

INFEASIBLE = "deadline_infeasible"


def admit_stage(dispatcher: Dispatcher, job: JobView, requests: Sequence[Request], now: float, reject: bool) -> None:
    """Decide the stage (``Dispatcher.decide_stage``) and apply the decision to ``requests``; raise the early
    503 instead when the job cannot make its deadline and ``reject`` (the client asked for it)."""
    decision = dispatcher.decide_stage(job, requests, now)
    if decision.best_effort and reject:
        metrics = dispatcher.metrics
        metrics.labelled(metrics.rejections, INFEASIBLE).inc()
        left = job.deadline_s - now
        raise HttpError(503, INFEASIBLE, f"predicted to miss its deadline ({max(left, 0.0):.3g} s left); nothing ran")
    decision.apply(requests)


def admit_call(dispatcher: Dispatcher, request: Request, now: float, reject: bool) -> None:
    """A direct call with a deadline, as the first stage of its own job (the simulator's single-call job);
    without a deadline there is nothing to judge."""
    if not math.isfinite(request.deadline_s):
        return
    job = JobView.at_release(
        request.job_id,
        JobKind.SINGLE.value,
        request.template,
        request.job_arrival_s,
        request.deadline_s - request.job_arrival_s,
        request.stage,
        (),
    )
    admit_stage(dispatcher, job, [request], now, reject)
