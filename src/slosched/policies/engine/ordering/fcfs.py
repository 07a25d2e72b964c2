"""Ordering ``fcfs``: first come, first served (arrival at the engine, then submission order)."""

from __future__ import annotations

from typing import Any

from slosched.core.views import EngineView, SeqView
from slosched.policies.engine.base import ORDERINGS
from slosched.policies.registry import NoParams, PolicyContext


class FcfsOrdering:
    static_keys = True
    time_invariant = True

    def key(self, seq: SeqView, engine: EngineView) -> Any:
        return (seq.request.arrival_s, seq.request.id)


@ORDERINGS.register("fcfs", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> FcfsOrdering:
    return FcfsOrdering()
