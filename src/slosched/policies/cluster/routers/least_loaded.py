"""Router ``least-loaded``: fewest requests queued or running (ties: lowest index); a profile of the
``least-loaded`` scorer under the max picker."""

from __future__ import annotations

from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pickers import MaxPicker
from slosched.policies.cluster.pipeline import Profile, WeightedScorer
from slosched.policies.cluster.scorers import LeastLoadedScorer
from slosched.policies.registry import NoParams, PolicyContext


class LeastLoadedRouter(Profile):
    def __init__(self) -> None:
        super().__init__([], [WeightedScorer("least-loaded", LeastLoadedScorer())], MaxPicker())


@ROUTERS.register("least-loaded", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> LeastLoadedRouter:
    return LeastLoadedRouter()
