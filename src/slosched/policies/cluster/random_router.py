"""Router ``random``: uniform choice with the run's seeded RNG."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.registry import PolicyContext, reject_unknown_params


class RandomRouter:
    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        return int(self._rng.integers(len(instances)))


@ROUTERS.register("random")
def build(params: Mapping[str, Any], context: PolicyContext) -> RandomRouter:
    reject_unknown_params("random", params, set())
    return RandomRouter(np.random.default_rng(context.rng.integers(2**63)))
