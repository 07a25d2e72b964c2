"""Job-layer policy protocol: runs when a job's stage is released, before its calls are routed.

It returns a ``StageDecision`` for the stage's calls: their ``budget_s`` (share of the job's remaining time),
a static ``priority`` and whether the job is now ``best_effort``, which routers and engine policies read once
the runtime has applied it. It sees the job only through a ``JobView``: what was submitted and what has
finished so far, never the stages still to come nor true output lengths; it never changes the requests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from slosched.core.request import Request
from slosched.core.views import InstanceView, JobView, StageDecision
from slosched.policies.registry import Registry


class JobPolicy(Protocol):
    def decide(self, job: JobView, requests: Sequence[Request], now_s: float) -> StageDecision: ...


@runtime_checkable
class BacklogAware(Protocol):
    """A job policy that can also read the instances' views at a release (the work queued on each), to judge
    a job by the backlog it would meet, not only by the time it needs alone. ``reads_backlog`` False: the
    runtime asks ``decide`` and builds no views for it."""

    @property
    def reads_backlog(self) -> bool: ...

    def decide_with_backlog(
        self, job: JobView, requests: Sequence[Request], now_s: float, views: Sequence[InstanceView]
    ) -> StageDecision: ...


ViewsFn = Callable[[], Sequence[InstanceView]]
StageDecider = Callable[[JobView, Sequence[Request], float, ViewsFn], StageDecision]


def stage_decider(policy: JobPolicy) -> StageDecider:
    """How a runtime (the simulator, the gateway) asks ``policy`` for a released stage's decision: with the
    cluster's views, read only then, where the policy reads the backlog; ``decide`` otherwise. Built once."""
    if isinstance(policy, BacklogAware) and policy.reads_backlog:
        aware = policy

        def with_backlog(job: JobView, requests: Sequence[Request], now_s: float, views: ViewsFn) -> StageDecision:
            return aware.decide_with_backlog(job, requests, now_s, views())

        return with_backlog

    def alone(job: JobView, requests: Sequence[Request], now_s: float, views: ViewsFn) -> StageDecision:
        return policy.decide(job, requests, now_s)

    return alone


JOB_POLICIES: Registry[JobPolicy] = Registry("job policy")
