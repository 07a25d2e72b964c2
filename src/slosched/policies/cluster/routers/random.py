"""Router ``random``: uniform choice with the run's seeded RNG; a profile with no scorer under the
``random`` picker."""

from __future__ import annotations

import numpy as np

from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pickers import RandomPicker
from slosched.policies.cluster.pipeline import Profile
from slosched.policies.registry import NoParams, PolicyContext


class RandomRouter(Profile):
    def __init__(self, rng: np.random.Generator) -> None:
        super().__init__([], [], RandomPicker(rng))


@ROUTERS.register("random", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> RandomRouter:
    return RandomRouter(np.random.default_rng(context.rng.integers(2**63)))
