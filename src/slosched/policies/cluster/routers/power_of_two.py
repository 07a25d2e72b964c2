"""Router ``power-of-two``: power of two choices, the load balancer of vLLM's Rust router and SGLang's router.

Two distinct instances are drawn uniformly at random from the run's seeded RNG; the one with fewer
outstanding tokens (queued prefill + predicted remaining decode, as ``least-tokens`` scores them) wins,
ties to the first drawn. Invariants: the pick is always one of the two candidates and never the one with
strictly more outstanding tokens; with one instance it is that instance (no draw); the same seed gives
the same picks. Sampling two instead of scanning all is what makes it robust to stale views: many routers
(or one router between refreshes) do not all herd onto the single least loaded instance.

A profile of the ``least-tokens`` scorer under the ``sample`` picker with two choices.
"""

from __future__ import annotations

from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pickers import SamplePicker
from slosched.policies.cluster.pipeline import Profile, WeightedScorer
from slosched.policies.cluster.scorers import LeastTokensScorer, outstanding_tokens
from slosched.policies.registry import NoParams, PolicyContext


class PowerOfTwoRouter(Profile):
    def __init__(self, seed: int) -> None:
        self.sampler = SamplePicker(seed, choices=2)
        super().__init__([], [WeightedScorer("least-tokens", LeastTokensScorer())], self.sampler)

    def candidates(self, num_instances: int) -> tuple[int, int]:
        """Two distinct positions, uniform over ordered pairs (the draws ``route`` makes)."""
        first, second = self.sampler.draw(num_instances)
        return first, second


__all__ = ["PowerOfTwoRouter", "outstanding_tokens"]


@ROUTERS.register("power-of-two", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> PowerOfTwoRouter:
    return PowerOfTwoRouter(int(context.rng.integers(2**63)))
