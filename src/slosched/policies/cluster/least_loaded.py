"""Router ``least-loaded``: fewest requests queued or running (ties: lowest index)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS, ScoringRouter
from slosched.policies.registry import PolicyContext, reject_unknown_params


class LeastLoadedRouter(ScoringRouter):
    def score(self, request: Request, instance: InstanceView, now_s: float) -> float:
        return -float(instance.num_running + instance.num_waiting)


@ROUTERS.register("least-loaded")
def build(params: Mapping[str, Any], context: PolicyContext) -> LeastLoadedRouter:
    reject_unknown_params("least-loaded", params, set())
    return LeastLoadedRouter()
