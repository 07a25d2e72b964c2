"""Router ``least-tokens``: fewest outstanding tokens (queued prefill + predicted remaining decode)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS, ScoringRouter
from slosched.policies.registry import PolicyContext, reject_unknown_params


class LeastTokensRouter(ScoringRouter):
    def score(self, request: Request, instance: InstanceView, now_s: float) -> float:
        return -(instance.waiting_prefill_tokens + instance.outstanding_decode_tokens)


@ROUTERS.register("least-tokens")
def build(params: Mapping[str, Any], context: PolicyContext) -> LeastTokensRouter:
    reject_unknown_params("least-tokens", params, set())
    return LeastTokensRouter()
