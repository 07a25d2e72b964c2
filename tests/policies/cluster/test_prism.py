"""PRISM's score properties and the NexusSched baseline routers."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.perf.linear import LinearStepPredictor
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.routers.latency_lagging import LatencyLaggingRouter
from slosched.policies.cluster.routers.prism import PrismRouter
from slosched.policies.cluster.routers.session_affinity import SessionAffinityRouter
from slosched.policies.cluster.routers.weighted_static import WeightedStaticRouter, profile_tokens_per_s
from slosched.policies.engine.nexus_state import EngineState
from slosched.policies.registry import PolicyContext
from slosched.sim.views import InstanceSnapshot

SPEC = InstanceSpec(name="h", gpu="H100", model="Llama-3-8B")


def _view(index: int = 0, exported: EngineState | None = None, running: int = 0, waiting: int = 0) -> InstanceSnapshot:
    state = exported or EngineState(0.02, 1000.0, 10.0, 1e6, 100_000.0)
    return InstanceSnapshot(
        index=index,
        spec=SPEC,
        snapshot_s=0.0,
        num_running=running,
        num_waiting=waiting,
        waiting_prefill_tokens=0,
        outstanding_decode_tokens=0.0,
        num_free_kv_blocks=1000,
        num_kv_blocks=2000,
        step_predictor=LinearStepPredictor(),
        exported=state.to_mapping(),
    )


def _request(session: str | None = None, tpot: float | None = 0.05, ttft: float | None = None) -> Request:
    request = Request(
        id="r",
        job_id="j",
        stage="call",
        template="chat",
        prompt_tokens=1000,
        max_output_tokens=500,
        arrival_s=0.0,
        job_arrival_s=0.0,
        session_id=session,
        tpot_slo_s=tpot,
        ttft_slo_s=ttft,
    )
    request.predicted_output_tokens = 200.0
    return request


BASE = EngineState(0.02, 1000.0, 10.0, 1e6, 100_000.0)


@pytest.mark.parametrize(
    ("field", "worse"),
    [("latency_s", 0.2), ("pending_prefill_tokens", 50_000.0), ("pending_requests", 200.0), ("free_kv_tokens", 5000.0)],
)
def test_score_is_monotone_in_each_factor(field: str, worse: float) -> None:
    router = PrismRouter()
    request = _request()
    good = router.score(request, _view(exported=BASE))
    bad = router.score(request, _view(exported=replace(BASE, **{field: worse})))
    assert 0.0 < bad < good


def test_score_grows_with_peak_capacity_and_is_zero_when_kv_cannot_fit() -> None:
    router = PrismRouter()
    request = _request()
    slow = router.score(request, _view(exported=replace(BASE, peak_tokens_per_s=10_000.0)))
    assert slow < router.score(request, _view(exported=BASE))
    assert router.score(request, _view(exported=replace(BASE, free_kv_tokens=1100.0))) == 0.0
    # Every instance full: the request still goes somewhere (the KV factor is dropped).
    full = [_view(i, replace(BASE, free_kv_tokens=10.0, pending_requests=float(10 - i))) for i in range(3)]
    assert router.route(request, full, 0.0) == 2


def test_latency_factor_uses_the_requests_slo() -> None:
    router = PrismRouter()
    s_lat, *_ = router.factors(_request(tpot=0.02), _view(exported=BASE))  # L_e at the TPOT SLO
    assert s_lat == pytest.approx(0.5)
    s_lat_ttft, *_ = router.factors(_request(tpot=None, ttft=10.0), _view(exported=BASE))
    assert s_lat_ttft > 0.99


def test_session_affinity_bonus_and_weights() -> None:
    router = PrismRouter()
    views = [_view(0), _view(1, replace(BASE, pending_requests=11.0))]
    assert router.route(_request("s1"), views, 0.0) == 0
    loaded = [_view(0, replace(BASE, pending_requests=12.0)), _view(1, replace(BASE, pending_requests=11.0))]
    assert router.route(_request("s1"), loaded, 0.0) == 0  # the bonus keeps the session home
    assert router.route(_request("s2"), loaded, 0.0) == 1
    no_affinity = PrismRouter(w_affinity=0.0)
    no_affinity.route(_request("s1"), views, 0.0)
    assert no_affinity.route(_request("s1"), loaded, 0.0) == 1
    assert PrismRouter(w_load=2.0).score(_request(), _view()) < PrismRouter().score(_request(), _view())


def test_prism_estimates_state_for_engines_that_export_none() -> None:
    view = replace(_view(running=4), exported={})
    assert 0.0 < PrismRouter().score(_request(), view) <= 1.0


def test_factory_validates_parameters() -> None:
    context = PolicyContext((SPEC,), np.random.default_rng(0), HistoryOutputPredictor())
    assert isinstance(ROUTERS.build("prism", {"w_kv": 2}, context), PrismRouter)
    with pytest.raises(ConfigError, match="w_load"):
        ROUTERS.build("prism", {"w_load": -1}, context)
    with pytest.raises(ConfigError, match="affinity_bonus"):
        ROUTERS.build("prism", {"affinity_bonus": 0.5}, context)


def test_session_affinity_router_sticks() -> None:
    router = SessionAffinityRouter()
    views = [_view(0, running=5), _view(1, running=1)]
    assert router.route(_request("a"), views, 0.0) == 1
    assert router.route(_request("a"), [_view(0), _view(1, running=9)], 0.0) == 1
    assert router.route(_request(None), [_view(0), _view(1, running=9)], 0.0) == 0


def test_latency_lagging_averages_a_two_second_window() -> None:
    router = LatencyLaggingRouter(2.0)
    views = [_view(0), _view(1)]
    router.on_request_finished(0, _request(), 5.0, 1.0)
    router.on_request_finished(1, _request(), 1.0, 1.0)
    assert router.route(_request(), views, 1.5) == 1
    router.on_request_finished(1, _request(), 9.0, 4.0)
    assert router.average_s(0, 4.0) == 5.0  # window empty: keeps the last mean
    assert router.average_s(1, 4.0) == 9.0 and router.route(_request(), views, 4.0) == 0


def test_weighted_static_follows_offline_throughput() -> None:
    fast, slow = SPEC, replace(SPEC, name="a6000", gpu="A6000")
    assert profile_tokens_per_s(fast) > 2 * profile_tokens_per_s(slow)
    router = WeightedStaticRouter([3.0, 1.0])
    picks = [router.route(_request(), [_view(0), _view(1)], 0.0) for _ in range(8)]
    assert picks.count(0) == 6 and picks.count(1) == 2


def test_unfitted_engine_is_scored_at_the_median_of_the_fitted_ones() -> None:
    """An engine with no fitted step model exports an unknown peak: it must look neither idle nor slow."""
    router = PrismRouter()
    loaded = replace(BASE, pending_prefill_tokens=20_000.0)
    fitted = [_view(0, replace(loaded, peak_tokens_per_s=p)) for p in (50_000.0, 100_000.0, 300_000.0)]
    unfitted = _view(3, replace(loaded, peak_tokens_per_s=math.inf))
    states = router.states([*fitted, unfitted])
    assert states[3][4] == 100_000.0 and [s[4] for s in states[:3]] == [50_000.0, 100_000.0, 300_000.0]
    # Same pending work: the unfitted engine ties the median engine instead of beating them all.
    request = _request()
    scores = [router.score(request, view, state=state) for view, state in zip([*fitted, unfitted], states, strict=True)]
    assert scores[3] == pytest.approx(scores[1]) and scores[3] < scores[2]
    assert router.route(request, [*fitted, unfitted], 0.0) == 2
    # No engine fitted: every one gets the same neutral peak (the median of the view estimates).
    cold = router.states([unfitted, replace(unfitted, index=4)])
    assert cold[0][4] == cold[1][4] and math.isfinite(cold[0][4])
    own = PrismRouter(unfitted_peak="view").states([*fitted, unfitted])[3][4]
    assert math.isfinite(own) and own > 0


def test_unfitted_engines_do_not_herd_the_traffic() -> None:
    """Routing a stream over two equal engines, one not fitted yet, splits it instead of herding."""
    router = PrismRouter()
    pending = [0.0, 0.0]
    peaks = [100_000.0, math.inf]
    for _ in range(40):
        views = [_view(i, EngineState(0.02, 1000.0 * pending[i], pending[i], 1e6, peaks[i])) for i in range(2)]
        pending[router.route(_request(), views, 0.0)] += 1
    assert pending == [20.0, 20.0]
    with pytest.raises(ConfigError, match="unfitted_peak"):
        PrismRouter(unfitted_peak="inf")
