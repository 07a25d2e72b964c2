"""Router ``least-tokens``: fewest outstanding tokens (queued prefill + predicted remaining decode); a profile
of the ``least-tokens`` scorer under the max picker (ties: lowest index)."""

from __future__ import annotations

from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pickers import MaxPicker
from slosched.policies.cluster.pipeline import Profile, WeightedScorer
from slosched.policies.cluster.scorers import LeastTokensScorer
from slosched.policies.registry import NoParams, PolicyContext


class LeastTokensRouter(Profile):
    def __init__(self) -> None:
        super().__init__([], [WeightedScorer("least-tokens", LeastTokensScorer())], MaxPicker())


@ROUTERS.register("least-tokens", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> LeastTokensRouter:
    return LeastTokensRouter()
