"""The backlog a call would meet: its least predicted latency over the instances, counting the work queued
ahead of it that can still count (job-level admission, ``critical-path``'s ``backlog`` setting).

Per instance, as the stack's router predicts a call's latency (``deadline-completion``): the prompt tokens
waiting there plus the call's own prompt, at the instance's peak prefill rate (PRISM's ``Pmax``, exported by
the engine or estimated from the view's belief), then its predicted output at one decode step of ``B + 1``
sequences per token (the view's belief step-time model). Two differences, both because this judges whether
a *job* can still make it rather than where a call should go:

- Waiting calls already relegated to best effort are not counted: the engine serves them after every call
  that can still count, so they delay nobody feasible. Counting them made every job look hopeless once a
  few were relegated, and relegation fed on itself.
- No prefix-cache credit: a cached prefix only makes the call sooner, so the estimate errs towards
  relegating. It does not bind where that would matter: on Text-to-SQL at 1.2x the strongest baseline's
  capacity (seeds 1-3) the stack with this test switched off relegated the same jobs; the demand test
  (``demand.py``), which credits cached prefixes, is the one that binds.

Belief only: prompt lengths, predicted outputs, views; never true lengths.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.routers.deadline_completion import DECODE_REF_CONTEXT
from slosched.policies.cluster.routers.prism import PrismModel
from slosched.policies.job.bands import BandOf


def feasible_waiting_tokens(view: InstanceView, band_of: BandOf | None = None, band: float = 0.0) -> int:
    """Prompt tokens waiting on ``view`` whose calls can still count (not relegated to best effort) and, with
    tenant bands (``bands.py``), are of band ``band`` or below (a higher band waits behind the call)."""
    if band_of is None:
        return sum(request.prompt_tokens for request in view.waiting_requests if not request.best_effort)
    return sum(
        request.prompt_tokens
        for request in view.waiting_requests
        if not request.best_effort and band_of(request.tenant) <= band
    )


@dataclass(frozen=True, slots=True)
class QueueAhead:
    """What a new call meets on one instance: feasible prompt tokens waiting, the peak prefill rate, the
    decode step of the running batch plus one."""

    waiting_tokens: int
    peak_tokens_per_s: float
    decode_step_s: float

    def latency_s(self, request: Request) -> float:
        prefill_s = (self.waiting_tokens + request.prompt_tokens) / self.peak_tokens_per_s
        return prefill_s + max(request.predicted_output_tokens, 1.0) * self.decode_step_s


def queues_ahead(
    views: Sequence[InstanceView], model: PrismModel, band_of: BandOf | None = None, band: float = 0.0
) -> list[QueueAhead]:
    """Each instance's ``QueueAhead`` now for a call of tenant band ``band`` (PRISM's states for the peaks,
    computed once per release)."""
    ahead = []
    for view, state in zip(views, model.states(views), strict=True):
        batch = view.num_running + 1
        decode_step = view.step_predictor.predict_s(0, 0, batch, batch * DECODE_REF_CONTEXT)
        ahead.append(QueueAhead(feasible_waiting_tokens(view, band_of, band), state[4], decode_step))
    return ahead


def least_latency_s(requests: Sequence[Request], ahead: Sequence[QueueAhead]) -> float:
    """The released stage's least predicted latency given each instance's ``QueueAhead``: each call's least
    over the instances (module doc), the slowest call's (the calls run side by side); 0 without calls, inf
    without instances."""
    if not requests:
        return 0.0
    return max(min((queue.latency_s(request) for queue in ahead), default=math.inf) for request in requests)


def stage_latency_s(requests: Sequence[Request], views: Sequence[InstanceView], model: PrismModel) -> float:
    """``least_latency_s`` through the queues on ``views`` now."""
    if not requests:
        return 0.0
    return least_latency_s(requests, queues_ahead(views, model))
