"""Ordering ``urgency`` (Hexgen-Text2SQL, DESIGN 4.1): the most urgent queued request runs next.

``U = t_comp(q, m) - (budget - tau)``, ``tau`` = seconds queued at this instance, ``budget`` the request's
share of its job's remaining time (``request.budget_s``, set by a job policy such as ``stage-budget``).
Without a budget it falls back to the time to the job deadline when the request was queued
(``deadline_s - enqueue_s``, what the ``deadline`` job policy gives); without a deadline the urgency is
-inf and requests run first come, first served. Ties: arrival, then id.

Keys depend on the belief step-time model (refitted as the instance runs) and on ``tau``, so they are
recomputed whenever the queue is ordered (``static_keys = False``) and decisions may change with time
alone (``time_invariant = False``).
"""

from __future__ import annotations

import math
from typing import Any

from slosched.core.views import EngineView, SeqView
from slosched.policies.cost import request_t_comp_s
from slosched.policies.engine.base import ORDERINGS
from slosched.policies.registry import NoParams, PolicyContext


def urgency(seq: SeqView, engine: EngineView) -> float:
    """``U`` of a queued request on this engine (higher is more urgent; -inf without any deadline)."""
    request = seq.request
    budget = request.budget_s
    if budget is None:
        if not math.isfinite(request.deadline_s):
            return -math.inf
        budget = request.deadline_s - seq.enqueue_s
    tau = engine.now_s - seq.enqueue_s
    return request_t_comp_s(request, engine.step_predictor) - (budget - tau)


class UrgencyOrdering:
    static_keys = False
    time_invariant = False

    def key(self, seq: SeqView, engine: EngineView) -> Any:
        return (-urgency(seq, engine), seq.request.arrival_s, seq.request.id)


@ORDERINGS.register("urgency", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> UrgencyOrdering:
    return UrgencyOrdering()
