"""Job-layer policy protocol: runs when a job's stage is released, before its calls are routed.

It may set each request's ``budget_s`` (its share of the job's remaining time), ``deadline_s`` and
``priority``, which routers and engine policies read. It sees the job only through a ``JobView``: what was
submitted and what has finished so far, never the stages still to come nor true output lengths.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from slosched.core.request import Request
from slosched.core.views import JobView
from slosched.policies.registry import Registry


class JobPolicy(Protocol):
    def on_stage_released(self, job: JobView, requests: Sequence[Request], now_s: float) -> None: ...


JOB_POLICIES: Registry[JobPolicy] = Registry("job policy")
