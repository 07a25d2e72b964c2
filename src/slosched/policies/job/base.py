"""Job-layer policy protocol: runs when a job's stage is released, before its calls are routed.

It returns a ``StageDecision`` for the stage's calls: their ``budget_s`` (share of the job's remaining time),
a static ``priority`` and whether the job is now ``best_effort``, which routers and engine policies read once
the runtime has applied it. It sees the job only through a ``JobView``: what was submitted and what has
finished so far, never the stages still to come nor true output lengths; it never changes the requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from slosched.core.request import Request
from slosched.core.views import JobView, StageDecision
from slosched.policies.registry import Registry


class JobPolicy(Protocol):
    def decide(self, job: JobView, requests: Sequence[Request], now_s: float) -> StageDecision: ...


JOB_POLICIES: Registry[JobPolicy] = Registry("job policy")
