"""Router ``session-affinity``: every turn of a session goes where its first turn went (its KV is cached
there); requests without a session, and first turns, go to the least-loaded instance (fewest requests
queued or running; ties: lowest index).

A profile: ``session-affinity`` (weight 2) + ``least-loaded`` (weight 1) under the max picker with a
weighted sum: the home scores at least 2, every other candidate at most 1, so the home always wins and
the load decides only when no candidate is home."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pickers import MaxPicker
from slosched.policies.cluster.pipeline import Profile, WeightedScorer
from slosched.policies.cluster.scorers import LeastLoadedScorer, SessionAffinityScorer
from slosched.policies.registry import PolicyContext, reject_unknown_params


class SessionAffinityRouter(Profile):
    def __init__(self) -> None:
        scorers = [
            WeightedScorer("session-affinity", SessionAffinityScorer(), 2.0),
            WeightedScorer("least-loaded", LeastLoadedScorer(), 1.0),
        ]
        super().__init__([], scorers, MaxPicker())


@ROUTERS.register("session-affinity")
def build(params: Mapping[str, Any], context: PolicyContext) -> SessionAffinityRouter:
    reject_unknown_params("session-affinity", params, set())
    return SessionAffinityRouter()
