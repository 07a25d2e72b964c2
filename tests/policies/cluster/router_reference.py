"""The routers as they were before the pipeline (commit 6b48ec9), kept verbatim as the reference the
profiles must match decision for decision (``test_router_profiles``). Helpers that compute quantities
(PRISM states, prefix trees, the latency fit) are imported from the package: the reference is the
*selection* logic each router hand-rolled."""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Sequence

import numpy as np

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.routers.cache_aware import PrefixTree
from slosched.policies.cluster.routers.predicted_latency import LatencyFit, Prediction, Sample, features, headroom
from slosched.policies.cluster.routers.prism import UNFITTED_PEAKS, State, known, neutral_peak, view_peak, view_state
from slosched.policies.cluster.scorers import outstanding_tokens, request_load
from slosched.policies.cost import request_t_comp_s, t_queue_s

_exp = math.exp


class RefScoringRouter:
    """Highest score wins; ties go to the lowest index so results are deterministic.

    Subclasses implement ``score`` (higher is better; any real number).
    """

    def score(self, request: Request, instance: InstanceView, now_s: float) -> float:
        raise NotImplementedError

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        best_position = 0
        best_score = -float("inf")
        for position, instance in enumerate(instances):
            value = self.score(request, instance, now_s)
            if value > best_score:
                best_score = value
                best_position = position
        return best_position


class RefLeastTokensRouter(RefScoringRouter):
    def score(self, request: Request, instance: InstanceView, now_s: float) -> float:
        return -(instance.waiting_prefill_tokens + instance.outstanding_decode_tokens)


class RefLeastLoadedRouter(RefScoringRouter):
    def score(self, request: Request, instance: InstanceView, now_s: float) -> float:
        return -float(instance.num_running + instance.num_waiting)


class RefRoundRobinRouter:
    def __init__(self, num_instances: int) -> None:
        self._num_instances = max(num_instances, 1)
        self._next = 0

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        # Pick the first feasible instance at or after the cursor (cyclically).
        best_position = 0
        best_distance = self._num_instances + 1
        for position, instance in enumerate(instances):
            distance = (instance.index - self._next) % self._num_instances
            if distance < best_distance:
                best_distance = distance
                best_position = position
        self._next = (instances[best_position].index + 1) % self._num_instances
        return best_position


class RefRandomRouter:
    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        return int(self._rng.integers(len(instances)))


class RefSessionAffinityRouter:
    def __init__(self) -> None:
        self._sessions: dict[str, int] = {}

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        session = request.session_id
        if session is not None:
            home = self._sessions.get(session)
            for position, instance in enumerate(instances):
                if instance.index == home:
                    return position
        best_position = 0
        best_load = None
        for position, instance in enumerate(instances):
            load = instance.num_running + instance.num_waiting
            if best_load is None or load < best_load:
                best_load = load
                best_position = position
        if session is not None:
            self._sessions[session] = instances[best_position].index
        return best_position


class RefWeightedStaticRouter:
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


class RefWorkloadBalancedRouter(RefScoringRouter):
    def __init__(self, alpha: float, beta: float, min_queue_s: float) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ConfigError("workload-balanced.alpha", f"must be in [0, 1], got {alpha}")
        if beta <= 0 or min_queue_s <= 0:
            raise ConfigError("workload-balanced", "beta and min_queue_s must be > 0")
        self.alpha = alpha
        self.beta = beta
        self.min_queue_s = min_queue_s

    def score(self, request: Request, instance: InstanceView, now_s: float) -> float:
        queue_s = max(t_queue_s(instance), self.min_queue_s)
        balance = (1.0 - self.alpha) * self.beta / queue_s
        if self.alpha == 0.0:
            return balance
        return balance - self.alpha * request_t_comp_s(request, instance.step_predictor)


class RefLatencyLaggingRouter:
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

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        best_position = 0
        best = None
        for position, instance in enumerate(instances):
            value = self.average_s(instance.index, now_s)
            if best is None or value < best:
                best = value
                best_position = position
        return best_position


class RefPowerOfTwoRouter:
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


class RefCacheAwareRouter:
    def __init__(
        self, cache_threshold: float = 0.3, balance_abs_threshold: float = 64.0, balance_rel_threshold: float = 1.5
    ) -> None:
        self.cache_threshold = cache_threshold
        self.balance_abs_threshold = balance_abs_threshold
        self.balance_rel_threshold = balance_rel_threshold
        self._trees: dict[int, PrefixTree] = {}

    def is_imbalanced(self, instances: Sequence[InstanceView]) -> bool:
        loads = [request_load(instance) for instance in instances]
        low, high = min(loads), max(loads)
        return high - low > self.balance_abs_threshold and high > self.balance_rel_threshold * low

    def match_tokens(self, request: Request, instance: InstanceView) -> int:
        """Prompt tokens expected to hit the prefix cache of ``instance`` (cached now or routed recently)."""
        tree = self._trees.get(instance.index)
        routed = tree.match_blocks(request) * instance.spec.block_size if tree is not None else 0
        return min(max(instance.cached_prefix_tokens(request), routed), request.prompt_tokens)

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        position = self._choose(request, instances)
        self._remember(request, instances[position])
        return position

    def _choose(self, request: Request, instances: Sequence[InstanceView]) -> int:
        everyone = range(len(instances))
        if len(instances) == 1 or self.is_imbalanced(instances):
            return least_loaded(instances, everyone)
        matches = [self.match_tokens(request, instance) for instance in instances]
        best = max(matches)
        if best <= 0 or best < self.cache_threshold * request.prompt_tokens:
            return least_loaded(instances, everyone)
        return least_loaded(instances, [position for position in everyone if matches[position] == best])

    def _remember(self, request: Request, instance: InstanceView) -> None:
        tree = self._trees.get(instance.index)
        if tree is None:
            tree = self._trees[instance.index] = PrefixTree()
        tree.insert(request, max(instance.num_kv_blocks, 1))


def least_loaded(instances: Sequence[InstanceView], positions: Sequence[int]) -> int:
    """Fewest running + queued requests among ``positions``; ties: fewer outstanding tokens, lowest position."""
    return min(positions, key=lambda p: (request_load(instances[p]), outstanding_tokens(instances[p]), p))


class RefPredictedLatencyRouter:
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

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        position = self._choose(request, instances, now_s)
        chosen = instances[position]
        if len(self._in_flight) >= self._max_in_flight:
            del self._in_flight[next(iter(self._in_flight))]
        self._in_flight[request.id] = (chosen.index, features(request, chosen, now_s))
        return position

    def _choose(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        if self.fit.model is None:
            return min(range(len(instances)), key=lambda p: (outstanding_tokens(instances[p]), p))
        predictions = [self.predict(request, instance) for instance in instances]
        known = [prediction for prediction in predictions if prediction is not None]
        rooms = [headroom(request, prediction, now_s) for prediction in known]
        positive = [position for position, room in enumerate(rooms) if room is not None and room > 0]
        if positive:
            return min(positive, key=lambda p: (-(rooms[p] or 0.0), known[p].latency_s, p))
        return min(range(len(known)), key=lambda p: (known[p].latency_s, p))

    def on_request_finished(self, instance_index: int, request: Request, latency_s: float, now_s: float) -> None:
        entry = self._in_flight.pop(request.id, None)
        # A request re-routed behind this router's back was measured on an instance it did not see.
        if entry is None or entry[0] != instance_index:
            return
        sample = entry[1]
        self.fit.observe(instance_index, sample, now_s - sample.route_s)


class RefPrismRouter:
    """Score in [0, affinity_bonus^w_affinity]; 0 exactly when the request's KV cannot fit (weight > 0)."""

    def __init__(
        self,
        w_latency: float = 1.0,
        w_load: float = 1.0,
        w_kv: float = 1.0,
        w_affinity: float = 1.0,
        affinity_bonus: float = 2.0,
        load_scale_s: float = 1.0,
        step_slo_s: float = 0.1,
        request_tokens: float = 256.0,
        unfitted_peak: str = "median",
    ) -> None:
        self.weights = (w_latency, w_load, w_kv, w_affinity)
        self._plain = all(weight == 1.0 for weight in self.weights)  # skip pow in the common case
        self.affinity_bonus = affinity_bonus
        self.load_scale_s = load_scale_s
        self.step_slo_s = step_slo_s
        self.request_tokens = request_tokens
        if unfitted_peak not in UNFITTED_PEAKS:
            raise ConfigError("prism.unfitted_peak", f"expected one of {UNFITTED_PEAKS}, got {unfitted_peak!r}")
        self.unfitted_peak = unfitted_peak
        self._sessions: dict[str, int] = {}

    def factors(
        self, request: Request, instance: InstanceView, state: State | None = None
    ) -> tuple[float, float, float, float]:
        """(S_lat, S_load, S_kv, S_aff) of ``request`` on ``instance``, each >= 0. ``state``: the view
        state with Pmax_e already made neutral (``route`` passes it); alone, an unknown Pmax_e is
        replaced by the instance's own view estimate."""
        if state is None:
            state = view_state(instance)
            if not known(state[4]):
                state = (*state[:4], view_peak(instance))
        latency, prefill, pending, free_kv, peak = state
        prompt = request.prompt_tokens
        if request.tpot_slo_s is not None:
            x = latency / request.tpot_slo_s
        elif request.ttft_slo_s is not None:
            x = (latency + (prefill + prompt) / peak) / request.ttft_slo_s
        else:
            x = latency / self.step_slo_s
        x2 = x * x
        s_lat = 1.0 / (1.0 + x2 * x2)
        rho = (prefill + self.request_tokens * pending) / peak
        s_load = 1.0 / (1.0 + rho / self.load_scale_s)
        need = prompt + max(request.predicted_output_tokens, 1.0)
        s_kv = 0.0 if free_kv <= need else 1.0 - _exp(-(free_kv - need) / need)
        session = request.session_id
        s_aff = self.affinity_bonus if session is not None and self._sessions.get(session) == instance.index else 1.0
        return s_lat, s_load, s_kv, s_aff

    def score(self, request: Request, instance: InstanceView, use_kv: bool = True, state: State | None = None) -> float:
        s_lat, s_load, s_kv, s_aff = self.factors(request, instance, state)
        if not use_kv:
            s_kv = 1.0
        if self._plain:
            return s_lat * s_load * s_kv * s_aff
        w_lat, w_load, w_kv, w_aff = self.weights
        return s_lat**w_lat * s_load**w_load * s_kv**w_kv * s_aff**w_aff

    def states(self, instances: Sequence[InstanceView]) -> list[State]:
        """Every instance's view state, unknown peaks made neutral."""
        states = [view_state(instance) for instance in instances]
        peaks = neutral_peak(instances, states, self.unfitted_peak)
        return [(*state[:4], peak) for state, peak in zip(states, peaks, strict=True)]

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        states = self.states(instances)
        best = self._best(request, instances, states, True)
        if best < 0:
            best = max(self._best(request, instances, states, False), 0)
        if request.session_id is not None:
            self._sessions[request.session_id] = instances[best].index
        return best

    def _best(self, request: Request, instances: Sequence[InstanceView], states: Sequence[State], use_kv: bool) -> int:
        """Position of the highest positive score, -1 if every score is 0."""
        best_position = -1
        best_score = 0.0
        for position, instance in enumerate(instances):
            value = self.score(request, instance, use_kv, states[position])
            if value > best_score:
                best_score = value
                best_position = position
        return best_position
