"""LENS's token bounds for requests that carry no TTFT/TPOT SLO, derived from their deadline (pure functions).

The paper's LENS reads per-token SLOs. A workflow call (Text-to-SQL) or a relQuery row carries a deadline
instead: the job's absolute deadline and, when a job policy apportions it, the call's budget (its share of
the job's remaining time from its release). Without a bound LENS would pick the shortest step, starve
prefill and miss every deadline, so it derives one from what a client knows (deadline, budget, the
predicted output length; never the true one):

* per-step bound (the TPOT role) of a running request: its remaining slack divided by its predicted
  remaining decode steps (at least 1); the tightest over the running requests;
* first-token bound (the TTFT role) of a waiting request: its remaining slack minus its predicted decode
  steps at the current decode-only step time.

A request whose slack is gone (late) gives no bound: it can no longer be helped, and letting it drive
the target would shrink every step for nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from slosched.core.request import Request
from slosched.core.views import SeqView


def call_deadline_s(request: Request) -> float:
    """The call's own deadline: the tighter of the job deadline and release + budget (inf when none)."""
    deadline = request.deadline_s
    if request.budget_s is not None:
        deadline = min(deadline, request.arrival_s + request.budget_s)
    return deadline


def remaining_steps(request: Request, num_output_tokens: int) -> float:
    """Predicted decode steps still to run (at least 1)."""
    return max(request.predicted_output_tokens - num_output_tokens, 1.0)


def step_bound_s(running: Iterable[SeqView], now_s: float) -> float | None:
    """Tightest ``slack / remaining decode steps`` over the running requests; None when none has a
    finite deadline still ahead."""
    bound = math.inf
    for seq in running:
        slack = call_deadline_s(seq.request) - now_s
        if 0.0 < slack < math.inf:
            bound = min(bound, slack / remaining_steps(seq.request, seq.num_output_tokens))
    return bound if bound < math.inf else None


def first_token_bound_s(request: Request, now_s: float, step_s: float) -> float | None:
    """Time left for the first token of a waiting request if its decode then runs at ``step_s`` per
    token; None when it has no finite deadline or can no longer make it."""
    slack = call_deadline_s(request) - now_s
    bound = slack - remaining_steps(request, 0) * step_s
    return bound if 0.0 < bound < math.inf else None
