"""Router ``power-of-two``: power of two choices, the load balancer of vLLM's Rust router and SGLang's router.

Two distinct instances are drawn uniformly at random from the run's seeded RNG; the one with fewer
outstanding tokens (queued prefill + predicted remaining decode, as ``least-tokens`` scores them) wins,
ties to the first drawn. Invariants: the pick is always one of the two candidates and never the one with
strictly more outstanding tokens; with one instance it is that instance (no draw); the same seed gives
the same picks. Sampling two instead of scanning all is what makes it robust to stale views: many routers
(or one router between refreshes) do not all herd onto the single least loaded instance.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.registry import PolicyContext, reject_unknown_params


def outstanding_tokens(instance: InstanceView) -> float:
    """Queued prefill plus predicted remaining decode tokens: the load ``least-tokens`` minimises."""
    return instance.waiting_prefill_tokens + instance.outstanding_decode_tokens


class PowerOfTwoRouter:
    def __init__(self, seed: int) -> None:
        # The stdlib generator: two scalar draws per call cost far less than numpy's per-call overhead.
        self._rng = random.Random(seed)

    def candidates(self, num_instances: int) -> tuple[int, int]:
        """Two distinct positions, uniform over ordered pairs."""
        first = self._rng.randrange(num_instances)
        second = self._rng.randrange(num_instances - 1)
        return first, second + 1 if second >= first else second

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        if len(instances) == 1:
            return 0
        first, second = self.candidates(len(instances))
        if outstanding_tokens(instances[second]) < outstanding_tokens(instances[first]):
            return second
        return first


@ROUTERS.register("power-of-two")
def build(params: Mapping[str, Any], context: PolicyContext) -> PowerOfTwoRouter:
    reject_unknown_params("power-of-two", params, set())
    return PowerOfTwoRouter(int(context.rng.integers(2**63)))
