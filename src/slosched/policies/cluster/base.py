"""Cluster-layer router protocol and the filter -> score -> pick pipeline most routers share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.registry import Registry


class Router(Protocol):
    """Picks the instance for one released request; returns an index into ``instances``.

    ``instances`` holds only instances that can serve the request at all (model length, KV capacity), so a
    router never has to re-check feasibility; it is never empty.
    """

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int: ...


@runtime_checkable
class CompletionObserver(Protocol):
    """Routers that learn from outcomes (e.g. lagging latency averages) implement this."""

    def on_request_finished(self, instance_index: int, request: Request, latency_s: float, now_s: float) -> None: ...


class ScoringRouter:
    """Highest score wins; ties go to the lowest index so results are deterministic.

    Subclasses implement ``score`` (higher is better; any real number).
    """

    def score(self, request: Request, instance: InstanceView, now_s: float) -> float:
        raise NotImplementedError

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        best_position = 0
        best_score = -float("inf")
        for position, instance in enumerate(instances):
            value = self.score(request, instance, now_s)
            if value > best_score:
                best_score = value
                best_position = position
        return best_position


ROUTERS: Registry[Router] = Registry("router")
