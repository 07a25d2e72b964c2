"""Router ``weighted-static``: smooth weighted round-robin with fixed per-instance weights from an
offline throughput profile (NexusSched's weighted-static baseline).

The profile is taken once, before serving, the way an operator benchmarks each GPU type: the tokens per
second of a full step (``max_batched_tokens`` tokens: 64 decodes at 1k context plus prefill) on the
instance's step-time model. It is an offline profile of the hardware, not live state; it never changes
with load, which is this baseline's weakness. Deterministic (nginx's smooth weighted round-robin).

A profile of the ``weighted-static`` scorer under the max picker: each decision adds every candidate's
weight to its credit (key: minus the credit, min-max normalised); ``on_routed`` takes the candidates'
total weight from the chosen one's credit.
"""

from __future__ import annotations

from collections.abc import Sequence

from slosched.core.instance import InstanceSpec
from slosched.core.views import InstanceView
from slosched.perf.roofline import RooflineModel
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pickers import MaxPicker
from slosched.policies.cluster.pipeline import SCORERS, Cycle, Key, Profile, RankedScorer, WeightedScorer
from slosched.policies.registry import NoParams, PolicyContext


def profile_tokens_per_s(spec: InstanceSpec) -> float:
    """Offline profile: tokens/s of one full step on ``spec``'s hardware (> 0)."""
    model = RooflineModel.build(spec.gpu, spec.model, spec.tp, spec.stack)
    decodes = min(64, spec.max_running, spec.max_batched_tokens - 1)
    prefill = spec.max_batched_tokens - decodes
    return spec.max_batched_tokens / model.step_time_s(prefill, 0, decodes, decodes * 1024)


class WeightedStaticScorer(RankedScorer):
    def __init__(self, weights: Sequence[float]) -> None:
        self.weights = list(weights)
        self._current = [0.0] * len(self.weights)
        self._total = 0.0

    def keys(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[Key]:
        weights, current = self.weights, self._current
        total = 0.0
        keys: list[Key] = []
        for view in views:
            index = view.index
            current[index] += weights[index]
            total += weights[index]
            keys.append(-current[index])
        self._total = total
        return keys

    def on_routed(self, cycle: Cycle, view: InstanceView) -> None:
        self._current[view.index] -= self._total


class WeightedStaticRouter(Profile):
    def __init__(self, weights: Sequence[float]) -> None:
        self.credits = WeightedStaticScorer(weights)
        super().__init__([], [WeightedScorer("weighted-static", self.credits)], MaxPicker())

    @property
    def weights(self) -> list[float]:
        return self.credits.weights


@SCORERS.register("weighted-static", params=NoParams)
def build_scorer(params: NoParams, context: PolicyContext) -> WeightedStaticScorer:
    return WeightedStaticScorer([profile_tokens_per_s(spec) for spec in context.instances])


@ROUTERS.register("weighted-static", params=NoParams)
def build(params: NoParams, context: PolicyContext) -> WeightedStaticRouter:
    return WeightedStaticRouter([profile_tokens_per_s(spec) for spec in context.instances])
