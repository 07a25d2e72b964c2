"""Router ``session-affinity``: every turn of a session goes where its first turn went (its KV is cached
there); requests without a session, and first turns, go to the least-loaded instance (fewest requests
queued or running; ties: lowest index).

A profile: ``session-affinity`` (weight 2) + ``least-loaded`` (weight 1) under the max picker with a
weighted sum: the home scores at least 2, every other candidate at most 1, so the home always wins and
the load decides only when no candidate is home."""

from __future__ import annotations

from collections.abc import Sequence

from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pickers import MaxPicker
from slosched.policies.cluster.pipeline import Cycle, Profile, WeightedScorer, first_min
from slosched.policies.cluster.scorers import LeastLoadedScorer, SessionAffinityScorer
from slosched.policies.registry import NoParams, PolicyContext


class SessionAffinityRouter(Profile):
    def __init__(self) -> None:
        self._affinity = SessionAffinityScorer()
        self._load = LeastLoadedScorer()
        scorers = [
            WeightedScorer("session-affinity", self._affinity, 2.0),
            WeightedScorer("least-loaded", self._load, 1.0),
        ]
        super().__init__([], scorers, MaxPicker())

    def choose(self, cycle: Cycle, views: Sequence[InstanceView]) -> int:
        """The weighted sum's decision without building a score table (it is on the routing path of every
        chat turn): the home, when it is a candidate; otherwise the least loaded, lowest index on ties."""
        home = self._affinity.home(cycle.request.session_id)
        if home is not None:
            for position, view in enumerate(views):
                if view.index == home:
                    return position
        return first_min(self._load.keys(cycle, views))


@ROUTERS.register("session-affinity", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> SessionAffinityRouter:
    return SessionAffinityRouter()
