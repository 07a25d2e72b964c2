"""Cluster-layer router protocol and registry; routers are built as pipelines (``pipeline.Profile``)."""

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


ROUTERS: Registry[Router] = Registry("router")
