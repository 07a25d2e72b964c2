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
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.engine import nexus_state as keys
from slosched.policies.registry import PolicyContext, param, reject_unknown_params

_exp = math.exp
_PARAMS = {
    "w_latency", "w_load", "w_kv", "w_affinity", "affinity_bonus", "load_scale_s", "step_slo_s",
    "request_tokens", "unfitted_peak",
}  # fmt: skip
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


class PrismRouter:
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


@ROUTERS.register("prism")
def build(params: Mapping[str, Any], context: PolicyContext) -> PrismRouter:
    reject_unknown_params("prism", params, _PARAMS)
    unfitted = str(params.get("unfitted_peak", "median"))
    values = {name: param(params, name, default, float) for name, default in _DEFAULTS.items()}
    for name, value in values.items():
        if name.startswith("w_") and value < 0:
            raise ConfigError(f"prism.{name}", f"must be >= 0, got {value}")
        if not name.startswith("w_") and not value > 0:
            raise ConfigError(f"prism.{name}", f"must be > 0, got {value}")
    if values["affinity_bonus"] < 1:
        raise ConfigError("prism.affinity_bonus", f"must be >= 1, got {values['affinity_bonus']}")
    return PrismRouter(**values, unfitted_peak=unfitted)


_DEFAULTS = {
    "w_latency": 1.0, "w_load": 1.0, "w_kv": 1.0, "w_affinity": 1.0, "affinity_bonus": 2.0,
    "load_scale_s": 1.0, "step_slo_s": 0.1, "request_tokens": 256.0,
}  # fmt: skip
