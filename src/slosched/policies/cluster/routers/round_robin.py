"""Router ``round-robin``: instances in turn, skipping those that cannot serve the request; a profile of
the ``round-robin`` scorer (the first candidate at or after the cursor, cyclically) under the max picker.

Scorer ``round-robin``: key = cyclic distance from the cursor (min-max normalised); ``on_routed`` moves
the cursor past the chosen instance. No parameters (the cycle length is the number of instances)."""

from __future__ import annotations

from collections.abc import Sequence

from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pickers import MaxPicker
from slosched.policies.cluster.pipeline import SCORERS, Cycle, Key, Profile, RankedScorer, WeightedScorer
from slosched.policies.registry import NoParams, PolicyContext


class RoundRobinScorer(RankedScorer):
    def __init__(self, num_instances: int) -> None:
        self._num_instances = max(num_instances, 1)
        self._next = 0

    def keys(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[Key]:
        cursor, size = self._next, self._num_instances
        # Small ints order and normalise (``min_max``) exactly as their floats; float() per view cost ~40%.
        return [(view.index - cursor) % size for view in views]

    def on_routed(self, cycle: Cycle, view: InstanceView) -> None:
        self._next = (view.index + 1) % self._num_instances


class RoundRobinRouter(Profile):
    def __init__(self, num_instances: int) -> None:
        super().__init__([], [WeightedScorer("round-robin", RoundRobinScorer(num_instances))], MaxPicker())


@SCORERS.register("round-robin", params=NoParams)
def build_scorer(params: NoParams, context: PolicyContext) -> RoundRobinScorer:
    return RoundRobinScorer(len(context.instances))


@ROUTERS.register("round-robin", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> RoundRobinRouter:
    return RoundRobinRouter(len(context.instances))
