"""Router ``latency-lagging``: lowest average end-to-end latency of the requests that finished on an
instance within the last ``window_s`` seconds (default 2 s), the latency-based baseline of NexusSched.

It learns only from completions (a ``CompletionObserver``), so it lags: an instance looks fast until
the requests it was just flooded with finish. An instance with no completion in the window keeps its
last average (0 before its first completion, so new instances are tried). Ties: lowest index.

A profile of the ``latency-lagging`` scorer (key: the lagging average, min-max normalised; parameter
``window_s``) under the max picker.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pickers import MaxPicker
from slosched.policies.cluster.pipeline import SCORERS, Cycle, Key, Profile, RankedScorer, WeightedScorer
from slosched.policies.registry import PolicyContext, setting


class LatencyLaggingScorer(RankedScorer):
    def __init__(self, window_s: float = 2.0) -> None:
        self.window_s = window_s
        self._samples: dict[int, deque[tuple[float, float]]] = {}
        self._sums: dict[int, float] = {}
        self._last: dict[int, float] = {}

    def on_request_finished(self, instance_index: int, request: Request, latency_s: float, now_s: float) -> None:
        self._samples.setdefault(instance_index, deque()).append((now_s, latency_s))
        self._sums[instance_index] = self._sums.get(instance_index, 0.0) + latency_s

    def average_s(self, instance_index: int, now_s: float) -> float:
        """Mean latency over the window ending at ``now_s`` (the last known mean if the window is empty)."""
        samples = self._samples.get(instance_index)
        if not samples:
            return self._last.get(instance_index, 0.0)
        cutoff = now_s - self.window_s
        total = self._sums[instance_index]
        while samples and samples[0][0] < cutoff:
            total -= samples.popleft()[1]
        self._sums[instance_index] = total if samples else 0.0
        if samples:
            self._last[instance_index] = total / len(samples)
        return self._last.get(instance_index, 0.0)

    def keys(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[Key]:
        now_s = cycle.now_s
        return [self.average_s(view.index, now_s) for view in views]


class LatencyLaggingRouter(Profile):
    def __init__(self, window_s: float = 2.0) -> None:
        self.lagging = LatencyLaggingScorer(window_s)
        super().__init__([], [WeightedScorer("latency-lagging", self.lagging)], MaxPicker())

    def average_s(self, instance_index: int, now_s: float) -> float:
        return self.lagging.average_s(instance_index, now_s)


@dataclass(frozen=True, slots=True)
class LatencyLaggingParams:
    window_s: float = setting(2.0, "seconds of finished requests the lagging average covers (> 0)")

    def __post_init__(self) -> None:
        if not self.window_s > 0:
            raise ConfigError("latency-lagging.window_s", f"must be > 0, got {self.window_s}")


@SCORERS.register("latency-lagging", params=LatencyLaggingParams)
def build_scorer(params: LatencyLaggingParams, context: PolicyContext) -> LatencyLaggingScorer:
    return LatencyLaggingScorer(params.window_s)


@ROUTERS.register("latency-lagging", params=LatencyLaggingParams)
def build(params: LatencyLaggingParams, context: PolicyContext) -> LatencyLaggingRouter:
    return LatencyLaggingRouter(params.window_s)
