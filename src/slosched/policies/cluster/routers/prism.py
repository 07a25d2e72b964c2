"""Router ``prism`` (NexusSched): multiplicative score over each engine's exported forward-looking state.

``score(e, r) = S_lat^w_latency * S_load^w_load * S_kv^w_kv * S_aff^w_affinity``, highest wins (ties:
lowest index). With ``s_e = <L_e, W_e, M_e, Pmax_e>`` (``policies.engine.nexus_state``):

* ``S_lat = 1 / (1 + x^4)``, ``x`` = the latency the request would see relative to its SLO: ``L_e /
  tpot_slo`` (the step it would decode in), else ``(L_e + (W_prefill + prompt) / Pmax_e) / ttft_slo``,
  else ``L_e / step_slo_s``. Near 1 while x is small, 1/2 at the SLO, falling fast beyond it.
* ``S_load = 1 / (1 + rho / load_scale_s)``, ``rho = (W_prefill + request_tokens * W_requests) /
  Pmax_e``: seconds of pending work at peak throughput, so a slower GPU counts as more loaded.
* ``S_kv = 0`` if ``M_e <= need`` (prompt + predicted output), else ``1 - exp(-(M_e - need) / need)``.
* ``S_aff = affinity_bonus`` (> 1) if this router last sent the request's session here (its KV is
  likely cached there), else 1.

Engines that export no state (baseline presets) are scored on the same quantities estimated from the
instance view: L_e from the belief step predictor on the running batch, W_e from the queue counters,
M_e = free KV - queued prompt tokens, Pmax_e from a predicted 2048-token prefill. If every instance
scores 0 (the KV fits nowhere), the KV factor is dropped so the request still goes somewhere.
All weights default to 1 and are configurable (``w_latency``, ``w_load``, ``w_kv``, ``w_affinity``).

An engine whose step model has not been fitted yet exports an unknown (non-finite) Pmax_e. It is scored
neutrally, never as infinitely fast (which made every unfitted engine look idle and herded the traffic):
``unfitted_peak="median"`` (default) takes the median Pmax_e of the fitted engines among the candidates,
or, when none is fitted, the median of the view estimates of all candidates; ``"view"`` takes the
engine's own view estimate.

A profile: the scorers ``prism-latency``, ``prism-load``, ``prism-kv`` (the factors above, one pass over
the candidates' states shared through the decision's scratch) and ``session-affinity`` (1 at home,
``1 / affinity_bonus`` elsewhere: the factor divided by the best candidate's, so in [0, 1]), weighted by
``w_*``, under the max picker with ``combine: product`` and ``relax: [prism-kv]`` (the KV fallback).
Scaling the affinity factor by ``1 / affinity_bonus`` leaves every decision unchanged for a power-of-two
bonus (the default 2) with ``w_affinity`` 1, where the scaling is exact; otherwise rounding can differ only
between candidates whose scores agree to about 1e-16 relative.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.core.views import InstanceView as View
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pickers import MaxPicker
from slosched.policies.cluster.pipeline import SCORERS, Cycle, Profile, WeightedScorer
from slosched.policies.cluster.scorers import SessionAffinityScorer
from slosched.policies.engine import nexus_state as keys
from slosched.policies.registry import PolicyContext, setting

_exp = math.exp
UNFITTED_PEAKS = ("median", "view")

State = tuple[float, float, float, float, float]


def view_state(instance: InstanceView) -> State:
    """(L_e, W_prefill, W_requests, M_e, Pmax_e): exported by the engine, else estimated from the view.
    Pmax_e is non-finite (unknown) when the engine exports one that is not fitted yet."""
    state = instance.exported
    if state:
        return (
            state[keys.LATENCY],
            state[keys.PENDING_PREFILL],
            state[keys.PENDING_REQUESTS],
            state[keys.FREE_KV],
            state[keys.PEAK],
        )
    predictor = instance.step_predictor
    block = instance.spec.block_size
    running = instance.num_running
    context = (instance.num_kv_blocks - instance.num_free_kv_blocks) * block
    latency = predictor.predict_s(0, 0, running, context) if running else 0.0
    peak = view_peak(instance)
    free = instance.num_free_kv_blocks * block - instance.waiting_prefill_tokens
    return latency, float(instance.waiting_prefill_tokens), float(running + instance.num_waiting), free, peak


def view_peak(instance: InstanceView) -> float:
    """Peak prefill throughput estimated from the view's belief step predictor (a 2048-token prefill)."""
    return 2048.0 / max(instance.step_predictor.predict_s(2048, 0, 0, 0), 1e-9)


def known(peak: float) -> bool:
    return math.isfinite(peak) and peak > 0


def neutral_peak(instances: Sequence[InstanceView], states: Sequence[State], mode: str = "median") -> list[float]:
    """Pmax_e per instance with every unknown one replaced (see the module docstring); O(n log n)."""
    peaks = [state[4] for state in states]
    if all(known(peak) for peak in peaks):
        return peaks
    if mode == "view":
        return [peak if known(peak) else view_peak(view) for peak, view in zip(peaks, instances, strict=True)]
    fitted = [peak for peak in peaks if known(peak)]
    pool = fitted or [view_peak(view) for view in instances]
    pool.sort()
    middle = len(pool) // 2
    median = pool[middle] if len(pool) % 2 else 0.5 * (pool[middle - 1] + pool[middle])
    return [peak if known(peak) else median for peak in peaks]


@dataclass(slots=True, frozen=True)
class PrismModel:
    """The parameters of PRISM's latency, load and KV factors (hashable: the key of a decision's cache)."""

    load_scale_s: float = 1.0
    step_slo_s: float = 0.1
    request_tokens: float = 256.0
    unfitted_peak: str = "median"

    def __post_init__(self) -> None:
        if self.unfitted_peak not in UNFITTED_PEAKS:
            raise ConfigError("prism.unfitted_peak", f"expected one of {UNFITTED_PEAKS}, got {self.unfitted_peak!r}")

    def states(self, instances: Sequence[InstanceView]) -> list[State]:
        """Every instance's view state, unknown peaks made neutral."""
        states = [view_state(instance) for instance in instances]
        peaks = neutral_peak(instances, states, self.unfitted_peak)
        return [(*state[:4], peak) for state, peak in zip(states, peaks, strict=True)]

    def factors(self, request: Request, state: State) -> tuple[float, float, float]:
        """(S_lat, S_load, S_kv) of ``request`` on an engine in ``state``, each in [0, 1]."""
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
        return s_lat, s_load, s_kv

    def columns(self, cycle: Cycle, views: Sequence[View]) -> tuple[list[float], ...]:
        """The three factor columns over ``views``, computed once per decision and shared by the scorers."""
        columns: tuple[list[float], ...] | None = cycle.scratch.get(self)
        if columns is None:
            columns = cycle.scratch[self] = self.columns_over(cycle.request, self.states(views))
        return columns

    def columns_over(self, request: Request, states: Sequence[State]) -> tuple[list[float], ...]:
        """The three factor columns of ``request`` over engines in ``states``."""
        rows = [self.factors(request, state) for state in states]
        return tuple(map(list, zip(*rows, strict=True)))


Columns = Callable[[Cycle, Sequence[View]], tuple[list[float], ...]]  # the three factor columns of a decision


class PrismFactorScorer:
    """One PRISM factor (``column`` 0: latency, 1: load, 2: KV) as a scorer; already in [0, 1]. ``columns``
    gives the decision's three columns: PRISM's own (``PrismModel.columns``) or, in the stack's router, the
    factors on the queue the call meets (``PredictedCompletion.factor_columns``)."""

    def __init__(self, columns: Columns, column: int) -> None:
        self.columns = columns
        self.column = column

    def score(self, cycle: Cycle, views: Sequence[View]) -> list[float]:
        return self.columns(cycle, views)[self.column]


class PrismRouter(Profile):
    """PRISM as a profile; ``factors``, ``score`` and ``states`` evaluate one engine the paper's way
    (affinity as the raw bonus), for inspection and tests."""

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
        self.model = PrismModel(load_scale_s, step_slo_s, request_tokens, unfitted_peak)
        self.weights = (w_latency, w_load, w_kv, w_affinity)
        self.affinity_bonus = affinity_bonus
        self.affinity = SessionAffinityScorer(miss_score=1.0 / affinity_bonus)
        scorers = [
            WeightedScorer("prism-latency", PrismFactorScorer(self.model.columns, 0), w_latency),
            WeightedScorer("prism-load", PrismFactorScorer(self.model.columns, 1), w_load),
            WeightedScorer("prism-kv", PrismFactorScorer(self.model.columns, 2), w_kv),
            WeightedScorer("session-affinity", self.affinity, w_affinity),
        ]
        super().__init__([], scorers, MaxPicker("product", relax=("prism-kv",)))

    def states(self, instances: Sequence[InstanceView]) -> list[State]:
        return self.model.states(instances)

    def factors(
        self, request: Request, instance: InstanceView, state: State | None = None
    ) -> tuple[float, float, float, float]:
        """(S_lat, S_load, S_kv, S_aff) of ``request`` on ``instance`` with the raw bonus; ``state`` as
        ``states`` gives it, else the instance's own (an unknown Pmax_e replaced by its view estimate)."""
        if state is None:
            state = view_state(instance)
            if not known(state[4]):
                state = (*state[:4], view_peak(instance))
        home = self.affinity.home(request.session_id)
        s_aff = self.affinity_bonus if home is not None and home == instance.index else 1.0
        return (*self.model.factors(request, state), s_aff)

    def score(self, request: Request, instance: InstanceView, use_kv: bool = True, state: State | None = None) -> float:
        """The paper's product ``prod S_i^w_i`` (in [0, bonus^w_affinity]); ``use_kv=False`` drops S_kv."""
        s_lat, s_load, s_kv, s_aff = self.factors(request, instance, state)
        w_lat, w_load, w_kv, w_aff = self.weights
        return s_lat**w_lat * s_load**w_load * (s_kv**w_kv if use_kv else 1.0) * s_aff**w_aff


@dataclass(frozen=True, slots=True)
class PrismModelParams:
    """The factors' parameters (scorers ``prism-latency``, ``prism-load``, ``prism-kv`` and the router)."""

    load_scale_s: float = setting(1.0, "seconds of pending work at which the load factor halves (> 0)")
    step_slo_s: float = setting(0.1, "step latency the latency factor is scaled to, for calls without TPOT SLO (> 0)")
    request_tokens: float = setting(256.0, "tokens one pending request counts as in the load (> 0)")
    unfitted_peak: str = setting("median", "peak of an engine not fitted yet: median of the fitted ones, or view")

    def __post_init__(self) -> None:
        for name in ("load_scale_s", "step_slo_s", "request_tokens"):
            value = getattr(self, name)
            if not value > 0:
                raise ConfigError(f"prism.{name}", f"must be > 0, got {value}")
        if self.unfitted_peak not in UNFITTED_PEAKS:
            raise ConfigError("prism.unfitted_peak", f"expected one of {UNFITTED_PEAKS}, got {self.unfitted_peak!r}")

    def model(self) -> PrismModel:
        return PrismModel(self.load_scale_s, self.step_slo_s, self.request_tokens, self.unfitted_peak)


@dataclass(frozen=True, slots=True)
class PrismParams(PrismModelParams):
    w_latency: float = setting(1.0, "exponent of the latency factor (>= 0)")
    w_load: float = setting(1.0, "exponent of the load factor (>= 0)")
    w_kv: float = setting(1.0, "exponent of the KV factor (>= 0)")
    w_affinity: float = setting(1.0, "exponent of the session-affinity bonus (>= 0)")
    affinity_bonus: float = setting(2.0, "score multiplier on the session's home instance (>= 1)")

    def __post_init__(self) -> None:
        for name in ("w_latency", "w_load", "w_kv", "w_affinity"):
            if getattr(self, name) < 0:
                raise ConfigError(f"prism.{name}", f"must be >= 0, got {getattr(self, name)}")
        PrismModelParams.__post_init__(self)
        if self.affinity_bonus < 1:
            raise ConfigError("prism.affinity_bonus", f"must be >= 1, got {self.affinity_bonus}")


@SCORERS.register("prism-latency", params=PrismModelParams)
def build_latency(params: PrismModelParams, context: PolicyContext) -> PrismFactorScorer:
    return PrismFactorScorer(params.model().columns, 0)


@SCORERS.register("prism-load", params=PrismModelParams)
def build_load(params: PrismModelParams, context: PolicyContext) -> PrismFactorScorer:
    return PrismFactorScorer(params.model().columns, 1)


@SCORERS.register("prism-kv", params=PrismModelParams)
def build_kv(params: PrismModelParams, context: PolicyContext) -> PrismFactorScorer:
    return PrismFactorScorer(params.model().columns, 2)


@ROUTERS.register("prism", params=PrismParams)
def build(params: PrismParams, context: PolicyContext) -> PrismRouter:
    return PrismRouter(
        w_latency=params.w_latency,
        w_load=params.w_load,
        w_kv=params.w_kv,
        w_affinity=params.w_affinity,
        affinity_bonus=params.affinity_bonus,
        load_scale_s=params.load_scale_s,
        step_slo_s=params.step_slo_s,
        request_tokens=params.request_tokens,
        unfitted_peak=params.unfitted_peak,
    )
