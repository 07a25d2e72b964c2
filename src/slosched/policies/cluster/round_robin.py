"""Router ``round-robin``: instances in turn, skipping those that cannot serve the request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.registry import PolicyContext, reject_unknown_params


class RoundRobinRouter:
    def __init__(self, num_instances: int) -> None:
        self._num_instances = max(num_instances, 1)
        self._next = 0

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        # Pick the first feasible instance at or after the cursor (cyclically).
        best_position = 0
        best_distance = self._num_instances + 1
        for position, instance in enumerate(instances):
            distance = (instance.index - self._next) % self._num_instances
            if distance < best_distance:
                best_distance = distance
                best_position = position
        self._next = (instances[best_position].index + 1) % self._num_instances
        return best_position


@ROUTERS.register("round-robin")
def build(params: Mapping[str, Any], context: PolicyContext) -> RoundRobinRouter:
    reject_unknown_params("round-robin", params, set())
    return RoundRobinRouter(len(context.instances))
