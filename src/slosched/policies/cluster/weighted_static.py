"""Router ``weighted-static``: smooth weighted round-robin with fixed per-instance weights from an
offline throughput profile (NexusSched's weighted-static baseline).

The profile is taken once, before serving, the way an operator benchmarks each GPU type: the tokens per
second of a full step (``max_batched_tokens`` tokens: 64 decodes at 1k context plus prefill) on the
instance's step-time model. It is an offline profile of the hardware, not live state; it never changes
with load, which is this baseline's weakness. Deterministic (nginx's smooth weighted round-robin).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.perf.roofline import RooflineModel
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.registry import PolicyContext, reject_unknown_params


def profile_tokens_per_s(spec: InstanceSpec) -> float:
    """Offline profile: tokens/s of one full step on ``spec``'s hardware (> 0)."""
    model = RooflineModel.build(spec.gpu, spec.model, spec.tp, spec.stack)
    decodes = min(64, spec.max_running, spec.max_batched_tokens - 1)
    prefill = spec.max_batched_tokens - decodes
    return spec.max_batched_tokens / model.step_time_s(prefill, 0, decodes, decodes * 1024)


class WeightedStaticRouter:
    def __init__(self, weights: Sequence[float]) -> None:
        self.weights = list(weights)
        self._current = [0.0] * len(self.weights)

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        weights, current = self.weights, self._current
        total = 0.0
        best_position = 0
        best = None
        for position, instance in enumerate(instances):
            index = instance.index
            current[index] += weights[index]
            total += weights[index]
            if best is None or current[index] > best:
                best = current[index]
                best_position = position
        current[instances[best_position].index] -= total
        return best_position


@ROUTERS.register("weighted-static")
def build(params: Mapping[str, Any], context: PolicyContext) -> WeightedStaticRouter:
    reject_unknown_params("weighted-static", params, set())
    return WeightedStaticRouter([profile_tokens_per_s(spec) for spec in context.instances])
