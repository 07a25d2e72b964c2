"""Router ``predicted-latency``: per-instance TTFT and TPOT predicted by a model learned online from observed
requests, routed to the most headroom against the request's SLO; llm-d's predicted-latency scheduling
(its endpoint picker asks latency-predictor sidecars, trained on live traffic, for each pod's TTFT and
TPOT and prefers pods with positive headroom against the request's SLOs).

Model: ``ttft_m = s_m * (a + b * Q + e * N)`` and ``tpot_m = s_m * (c + d * N)``, where, as the router saw
them when it routed the request, ``Q`` is the prefill queued ahead plus the request's own prompt and ``N``
the requests running or queued on instance ``m`` including it; ``s_m`` is the instance's speed factor. A
completion reports one end-to-end latency, so TTFT and TPOT are fitted jointly as ``latency = ttft + tpot *
O`` with ``O`` the *predicted* output tokens (the router never sees true lengths). The shape (a, b, e, c, d)
is shared by all instances and fitted by non-negative least squares over the last ``window`` completions
(each normalised by its instance's factor); ``s_m`` is the ratio of the instance's observed to predicted
latency over its completions in that window. Both are refitted every ``refit_every`` completions.

Why this shape and not a free model per instance (what a sidecar per pod would fit): an instance sees only
the narrow band of load the router gives it, so its own load coefficients are not identifiable; a
per-instance fit learned a zero load slope on the busiest instance and herded traffic onto it. Sharing the
shape keeps every prediction monotone in load (coefficients >= 0) while the factor learns that an A6000 is
slower than an A100. An instance with too few completions keeps its last factor (1 before its first:
neutral); before the first fit the router falls back to the fewest outstanding tokens (``least-tokens``).
Limit: from end-to-end latencies alone TTFT is weakly identified (decode dominates; on the demo the fit
puts all of it in TPOT), so a TTFT SLO constrains little; llm-d's sidecars see TTFT and TPOT separately.

Headroom is the smallest fraction of each SLO the prediction leaves: ``(deadline - now - latency) /
(deadline - now)`` when the request has a deadline, ``(ttft_slo - ttft) / ttft_slo`` and ``(tpot_slo - tpot)
/ tpot_slo`` when those are set. The instance with the most positive headroom wins; when none has any (or
the request has no SLO) the smallest predicted latency wins. Ties: lowest position. With a deadline only,
most headroom and smallest predicted latency pick the same instance.

A profile of the ``predicted-latency`` scorer under the max picker. The scorer's key is lexicographic
(rank-normalised): ``(outstanding tokens,)`` before the first fit; after it ``(0, -headroom, latency)`` for
candidates with positive headroom and ``(1, 0, latency)`` for the rest. It records what it saw of the
chosen instance in ``on_routed`` and learns in ``on_request_finished``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pickers import MaxPicker
from slosched.policies.cluster.pipeline import SCORERS, Cycle, Key, Profile, RankedScorer, WeightedScorer
from slosched.policies.cluster.scorers import outstanding_tokens
from slosched.policies.registry import PolicyContext, setting


@dataclass(slots=True, frozen=True)
class Sample:
    """What the router saw of one request when it routed it (the model's features)."""

    queued_tokens: float
    num_requests: float
    output_tokens: float
    route_s: float


@dataclass(slots=True, frozen=True)
class LatencyModel:
    """``ttft = a + b*Q + e*N``, ``tpot = c + d*N`` (before the instance factor); every coefficient >= 0."""

    a: float
    b: float
    e: float
    c: float
    d: float

    def ttft_s(self, queued_tokens: float, num_requests: float) -> float:
        return self.a + self.b * queued_tokens + self.e * num_requests

    def tpot_s(self, num_requests: float) -> float:
        return self.c + self.d * num_requests


@dataclass(slots=True, frozen=True)
class Prediction:
    ttft_s: float
    tpot_s: float
    latency_s: float


class LatencyFit:
    """The last ``window`` completions in a ring buffer, the shared model and the per-instance factors."""

    def __init__(self, window: int, min_samples: int, refit_every: int) -> None:
        self.window = window
        self.min_samples = min_samples
        self.refit_every = refit_every
        # Design rows (1, Q, N, O, O*N), latency, instance index: numpy so that a refit is vectorised.
        self._design = np.zeros((window, 5))
        self._latency = np.zeros(window)
        self._instance = np.zeros(window, dtype=np.int64)
        self._num_seen = 0
        self._num_new = 0
        self.model: LatencyModel | None = None
        self.factors: dict[int, float] = {}

    def observe(self, instance_index: int, sample: Sample, latency_s: float) -> None:
        row = self._num_seen % self.window
        queued, num, out = sample.queued_tokens, sample.num_requests, sample.output_tokens
        self._design[row] = (1.0, queued, num, out, out * num)
        self._latency[row] = latency_s
        self._instance[row] = instance_index
        self._num_seen += 1
        self._num_new += 1
        if self._num_seen >= self.min_samples and (self.model is None or self._num_new >= self.refit_every):
            self.refit()

    def factor(self, instance_index: int) -> float:
        return self.factors.get(instance_index, 1.0)

    def refit(self) -> None:
        """One alternation: the shared shape on factor-normalised latencies, then each factor against it."""
        size = min(self._num_seen, self.window)
        design, latency, instance = self._design[:size], self._latency[:size], self._instance[:size]
        factors = np.array([self.factor(int(index)) for index in instance])
        # Columns span 1 .. 1e5 (tokens x requests): scale them to unit size so NNLS converges cleanly.
        scale = np.maximum(design.max(axis=0), 1e-12)
        shape, _ = nnls(design / scale, latency / factors)
        shape = shape / scale
        predicted = design @ shape
        counts = np.bincount(instance)
        observed_sums, predicted_sums = np.bincount(instance, latency), np.bincount(instance, predicted)
        for index in np.flatnonzero((counts >= self.min_samples) & (predicted_sums > 0)):
            self.factors[int(index)] = float(observed_sums[index] / predicted_sums[index])
        # Shape x factor has one degree of freedom too many: pin the factors' mean over the window to 1, or
        # the shape drifts and the factor of an instance absent from the window loses its meaning.
        mean = float(np.mean([self.factor(int(index)) for index in instance]))
        if mean > 0:
            self.factors = {index: value / mean for index, value in self.factors.items()}
            shape = shape * mean
        self.model = LatencyModel(*(float(value) for value in shape))
        self._num_new = 0


class PredictedLatencyScorer(RankedScorer):
    lexicographic = True

    def __init__(self, window: int = 1024, min_samples: int = 16, refit_every: int = 32) -> None:
        self.fit = LatencyFit(window, min_samples, refit_every)
        # Requests in flight: id -> (instance index, what the router saw). Bounded: a request that fails
        # never reports back, and its entry must not live forever.
        self._in_flight: dict[str, tuple[int, Sample]] = {}
        self._max_in_flight = 1 << 16

    def predict(self, request: Request, instance: InstanceView) -> Prediction | None:
        model = self.fit.model
        if model is None:
            return None
        sample = features(request, instance, 0.0)
        factor = self.fit.factor(instance.index)
        ttft = factor * model.ttft_s(sample.queued_tokens, sample.num_requests)
        tpot = factor * model.tpot_s(sample.num_requests)
        return Prediction(ttft, tpot, ttft + tpot * sample.output_tokens)

    def keys(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[Key]:
        if self.fit.model is None:
            return [(outstanding_tokens(view),) for view in views]
        request, now_s = cycle.request, cycle.now_s
        keys: list[Key] = []
        for view in views:
            prediction = self.predict(request, view)
            assert prediction is not None  # the model is fitted
            room = headroom(request, prediction, now_s)
            if room is not None and room > 0:
                keys.append((0.0, -room, prediction.latency_s))
            else:
                keys.append((1.0, 0.0, prediction.latency_s))
        return keys

    def on_routed(self, cycle: Cycle, view: InstanceView) -> None:
        if len(self._in_flight) >= self._max_in_flight:
            del self._in_flight[next(iter(self._in_flight))]
        self._in_flight[cycle.request.id] = (view.index, features(cycle.request, view, cycle.now_s))

    def on_request_finished(self, instance_index: int, request: Request, latency_s: float, now_s: float) -> None:
        entry = self._in_flight.pop(request.id, None)
        # A request re-routed behind this router's back was measured on an instance it did not see.
        if entry is None or entry[0] != instance_index:
            return
        sample = entry[1]
        self.fit.observe(instance_index, sample, now_s - sample.route_s)


class PredictedLatencyRouter(Profile):
    def __init__(self, window: int = 1024, min_samples: int = 16, refit_every: int = 32) -> None:
        self.latency = PredictedLatencyScorer(window, min_samples, refit_every)
        super().__init__([], [WeightedScorer("predicted-latency", self.latency)], MaxPicker())

    @property
    def fit(self) -> LatencyFit:
        return self.latency.fit

    def predict(self, request: Request, instance: InstanceView) -> Prediction | None:
        return self.latency.predict(request, instance)


def features(request: Request, instance: InstanceView, now_s: float) -> Sample:
    return Sample(
        queued_tokens=float(instance.waiting_prefill_tokens + request.prompt_tokens),
        num_requests=float(instance.num_running + instance.num_waiting + 1),
        output_tokens=max(request.predicted_output_tokens, 1.0),
        route_s=now_s,
    )


def headroom(request: Request, prediction: Prediction, now_s: float) -> float | None:
    """Smallest fraction of each SLO the prediction leaves (negative: missed); None without any SLO."""
    rooms: list[float] = []
    if math.isfinite(request.deadline_s):
        budget = request.deadline_s - now_s
        rooms.append((budget - prediction.latency_s) / budget if budget > 0 else -math.inf)
    if request.ttft_slo_s is not None and request.ttft_slo_s > 0:
        rooms.append((request.ttft_slo_s - prediction.ttft_s) / request.ttft_slo_s)
    if request.tpot_slo_s is not None and request.tpot_slo_s > 0:
        rooms.append((request.tpot_slo_s - prediction.tpot_s) / request.tpot_slo_s)
    return min(rooms) if rooms else None


@dataclass(frozen=True, slots=True)
class PredictedLatencyParams:
    window: int = setting(1024, "observations the latency model is fitted on (>= min_samples)")
    min_samples: int = setting(16, "observations before the model is used (>= 5, its coefficients)")
    refit_every: int = setting(32, "observations between refits (>= 1)")

    def __post_init__(self) -> None:
        if self.min_samples < 5:  # five coefficients
            raise ConfigError("predicted-latency.min_samples", f"must be >= 5, got {self.min_samples}")
        if self.window < self.min_samples:
            raise ConfigError(
                "predicted-latency.window", f"must be >= min_samples ({self.min_samples}), got {self.window}"
            )
        if self.refit_every < 1:
            raise ConfigError("predicted-latency.refit_every", f"must be >= 1, got {self.refit_every}")


@SCORERS.register("predicted-latency", params=PredictedLatencyParams)
def build_scorer(params: PredictedLatencyParams, context: PolicyContext) -> PredictedLatencyScorer:
    return PredictedLatencyScorer(params.window, params.min_samples, params.refit_every)


@ROUTERS.register("predicted-latency", params=PredictedLatencyParams)
def build(params: PredictedLatencyParams, context: PolicyContext) -> PredictedLatencyRouter:
    return PredictedLatencyRouter(params.window, params.min_samples, params.refit_every)
