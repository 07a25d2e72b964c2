"""Router ``session-affinity``: every turn of a session goes where its first turn went (its KV is cached
there); requests without a session, and first turns, go to the least-loaded instance (fewest requests
queued or running; ties: lowest index)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.registry import PolicyContext, reject_unknown_params


class SessionAffinityRouter:
    def __init__(self) -> None:
        self._sessions: dict[str, int] = {}

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        session = request.session_id
        if session is not None:
            home = self._sessions.get(session)
            for position, instance in enumerate(instances):
                if instance.index == home:
                    return position
        best_position = 0
        best_load = None
        for position, instance in enumerate(instances):
            load = instance.num_running + instance.num_waiting
            if best_load is None or load < best_load:
                best_load = load
                best_position = position
        if session is not None:
            self._sessions[session] = instances[best_position].index
        return best_position


@ROUTERS.register("session-affinity")
def build(params: Mapping[str, Any], context: PolicyContext) -> SessionAffinityRouter:
    reject_unknown_params("session-affinity", params, set())
    return SessionAffinityRouter()
