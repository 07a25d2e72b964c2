"""The production-router baselines (power-of-two, cache-aware, predicted-latency) on hand-built views."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.core.request import PrefixId, Request
from slosched.perf.linear import LinearStepPredictor
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.base import ROUTERS, CompletionObserver
from slosched.policies.cluster.routers.cache_aware import CacheAwareRouter
from slosched.policies.cluster.routers.power_of_two import PowerOfTwoRouter, outstanding_tokens
from slosched.policies.cluster.routers.predicted_latency import PredictedLatencyRouter, headroom
from slosched.policies.registry import PolicyContext
from slosched.sim.views import InstanceSnapshot
from tests.conftest import make_instance


@dataclass
class _Load:
    running: int = 0
    waiting: int = 0
    prefill: int = 0
    decode: float = 0.0
    cached: int = 0


class _CachedSnapshot(InstanceSnapshot):
    """A snapshot whose prefix cache holds ``cached`` tokens of every prompt."""

    __slots__ = ("cached",)
    cached: int

    def cached_prefix_tokens(self, request: Request) -> int:
        return min(self.cached, request.prompt_tokens)


def _views(*loads: _Load) -> list[InstanceSnapshot]:
    views: list[InstanceSnapshot] = []
    for i, load in enumerate(loads):
        view = _CachedSnapshot(
            index=i,
            spec=make_instance(f"i{i}"),
            snapshot_s=0.0,
            num_running=load.running,
            num_waiting=load.waiting,
            waiting_prefill_tokens=load.prefill,
            outstanding_decode_tokens=load.decode,
            num_free_kv_blocks=1000,
            num_kv_blocks=1000,
            step_predictor=LinearStepPredictor(),
        )
        view.cached = load.cached
        views.append(view)
    return views


REQUEST = Request(
    id="r",
    job_id="j",
    stage="s",
    template="t",
    prompt_tokens=320,
    max_output_tokens=100,
    arrival_s=0.0,
    job_arrival_s=0.0,
    predicted_output_tokens=50.0,
)


def _context(seed: int = 0) -> PolicyContext:
    return PolicyContext(instances=(), rng=np.random.default_rng(seed), output_predictor=HistoryOutputPredictor())


# ---- power-of-two ------------------------------------------------------------------------------------


def test_power_of_two_picks_the_lighter_of_its_two_candidates() -> None:
    views = _views(*(_Load(prefill=100 * (i + 1), decode=7.0 * i) for i in range(6)))
    router = PowerOfTwoRouter(seed=3)
    probe = PowerOfTwoRouter(seed=3)  # same seed: same candidate draws
    for _ in range(50):
        first, second = probe.candidates(len(views))
        assert first != second
        assert router.route(REQUEST, views, 0.0) == min(first, second)  # loads grow with the position


def test_power_of_two_is_reproducible_by_seed_and_spreads() -> None:
    views = _views(*(_Load() for _ in range(5)))
    picks = [[ROUTERS.build("power-of-two", {}, _context(9)).route(REQUEST, views, 0.0)] for _ in range(2)]
    assert picks[0] == picks[1]
    router_a = ROUTERS.build("power-of-two", {}, _context(9))
    router_b = ROUTERS.build("power-of-two", {}, _context(9))
    seq_a = [router_a.route(REQUEST, views, 0.0) for _ in range(40)]
    assert seq_a == [router_b.route(REQUEST, views, 0.0) for _ in range(40)]
    assert len(set(seq_a)) > 2


def test_power_of_two_with_one_instance_returns_it() -> None:
    assert PowerOfTwoRouter(seed=0).route(REQUEST, _views(_Load(prefill=10**6)), 0.0) == 0


@settings(max_examples=60, deadline=None)
@given(
    loads=st.lists(st.tuples(st.integers(0, 5000), st.floats(0, 5000)), min_size=1, max_size=8),
    seed=st.integers(0, 2**32),
)
def test_power_of_two_never_picks_a_dominated_candidate(loads: list[tuple[int, float]], seed: int) -> None:
    views = _views(*(_Load(prefill=prefill, decode=decode) for prefill, decode in loads))
    router, probe = PowerOfTwoRouter(seed), PowerOfTwoRouter(seed)
    for _ in range(5):
        picked = router.route(REQUEST, views, 0.0)
        assert 0 <= picked < len(views)
        if len(views) > 1:
            first, second = probe.candidates(len(views))
            assert picked in (first, second)
            other = second if picked == first else first
            assert outstanding_tokens(views[picked]) <= outstanding_tokens(views[other])


# ---- cache-aware -------------------------------------------------------------------------------------


def test_cache_aware_follows_the_prefix_match_when_balanced() -> None:
    views = _views(_Load(running=5), _Load(running=9, cached=256), _Load(running=2))
    assert CacheAwareRouter().route(REQUEST, views, 0.0) == 1


def test_cache_aware_goes_to_the_least_loaded_when_imbalanced() -> None:
    views = _views(_Load(running=10), _Load(running=100, cached=320), _Load(running=30))
    assert CacheAwareRouter().route(REQUEST, views, 0.0) == 0  # 100 - 10 > 64 and 100 > 1.5 * 10
    # Both conditions are needed: a large absolute gap alone (200 vs 150) is not imbalance.
    views = _views(_Load(running=150), _Load(running=200, cached=320))
    assert CacheAwareRouter().route(REQUEST, views, 0.0) == 1


def test_cache_aware_below_the_threshold_or_on_a_tie_picks_the_least_loaded() -> None:
    short = _views(_Load(running=3), _Load(running=5, cached=64), _Load(running=1))
    assert CacheAwareRouter().route(REQUEST, short, 0.0) == 2  # 64 / 320 < 0.3
    tied = _views(_Load(running=4, cached=320), _Load(running=1), _Load(running=2, cached=320))
    assert CacheAwareRouter().route(REQUEST, tied, 0.0) == 2


def test_cache_aware_remembers_where_it_sent_a_shared_prefix() -> None:
    # Nothing is cached yet (the gateway's views always say so): the router's own tree keeps a template's
    # requests together until the load says otherwise.
    prefixed = replace(REQUEST, prefix=PrefixId(shared_key=7, shared_blocks=16, own_key=1, own_blocks=4))
    router = CacheAwareRouter()
    views = _views(_Load(running=3), _Load(running=1), _Load(running=2))
    first = router.route(prefixed, views, 0.0)
    assert first == 1
    views[1].num_running = 6  # now the busiest, but still balanced
    assert router.route(replace(prefixed, id="r2"), views, 0.0) == 1
    other = replace(prefixed, id="r3", prefix=PrefixId(shared_key=8, shared_blocks=16, own_key=2, own_blocks=4))
    assert router.route(other, views, 0.0) == 2


def test_cache_aware_rejects_bad_and_unknown_parameters() -> None:
    with pytest.raises(ConfigError, match="unknown"):
        ROUTERS.build("cache-aware", {"eviction_interval": 60}, _context())
    with pytest.raises(ConfigError, match="cache_threshold"):
        ROUTERS.build("cache-aware", {"cache_threshold": 1.5}, _context())
    router = ROUTERS.build("cache-aware", {"balance_abs_threshold": 8, "balance_rel_threshold": 2.0}, _context())
    assert isinstance(router, CacheAwareRouter) and router.balance_abs_threshold == 8.0


# ---- predicted-latency -------------------------------------------------------------------------------


def _observe(
    router: PredictedLatencyRouter, views: list[InstanceSnapshot], index: int, latency_s: float, n: int
) -> None:
    """Send ``n`` requests to ``views[index]`` (the only instance offered) at varying load and report each
    finished ``latency_s * (1 + running / 4)`` later: slower the busier, so the load slope is learnable."""
    view = views[index]
    running = view.num_running
    for k in range(n):
        view.num_running = k % 8
        request = replace(REQUEST, id=f"{index}-{k}-{latency_s}", predicted_output_tokens=float(20 + k % 7 * 10))
        assert router.route(request, [view], 0.0) == 0
        router.on_request_finished(index, request, latency_s, latency_s * (1 + view.num_running / 4))
    view.num_running = running


def test_predicted_latency_falls_back_to_least_tokens_before_observations() -> None:
    router = ROUTERS.build("predicted-latency", {}, _context())
    assert isinstance(router, CompletionObserver)
    views = _views(_Load(prefill=900), _Load(prefill=100, decode=50), _Load(prefill=400))
    assert router.route(REQUEST, views, 0.0) == 1


def test_predicted_latency_learns_which_instance_is_faster() -> None:
    router = PredictedLatencyRouter(window=256, min_samples=16, refit_every=8)
    views = _views(_Load(running=2), _Load(running=2))
    _observe(router, views, 0, latency_s=4.0, n=40)
    _observe(router, views, 1, latency_s=1.0, n=40)
    assert router.fit.factor(1) < router.fit.factor(0)
    assert router.route(replace(REQUEST, id="new"), views, 0.0) == 1
    # A fast instance still loses once its queue is long enough.
    views[1].num_running, views[1].waiting_prefill_tokens = 60, 20000
    assert router.route(replace(REQUEST, id="new2"), views, 0.0) == 0


def test_predicted_latency_uses_headroom_against_the_deadline_and_ttft_slo() -> None:
    router = PredictedLatencyRouter(window=256, min_samples=16, refit_every=8)
    views = _views(_Load(running=2), _Load(running=2))
    _observe(router, views, 0, latency_s=4.0, n=40)
    _observe(router, views, 1, latency_s=1.0, n=40)
    slow, fast = (router.predict(REQUEST, view) for view in views)
    assert slow is not None and fast is not None and fast.latency_s < slow.latency_s
    tight = replace(REQUEST, deadline_s=fast.latency_s * 2)
    assert headroom(tight, fast, 0.0) == pytest.approx(0.5)
    assert headroom(tight, slow, 0.0) < headroom(tight, fast, 0.0)  # type: ignore[operator]
    assert headroom(REQUEST, fast, 0.0) is None  # no SLO: smallest predicted latency decides
    late = replace(REQUEST, id="late", deadline_s=-1.0)  # already missed everywhere
    assert router.route(late, views, 0.0) == 1
    both = replace(REQUEST, deadline_s=100.0, ttft_slo_s=1.0, tpot_slo_s=fast.tpot_s / 2)
    assert headroom(both, fast, 0.0) == pytest.approx(-1.0)  # the tighter (TPOT) SLO is the binding one


def test_predicted_latency_never_learns_from_requests_it_did_not_route() -> None:
    router = PredictedLatencyRouter(window=64, min_samples=16, refit_every=8)
    for k in range(50):
        router.on_request_finished(0, replace(REQUEST, id=f"x{k}"), 1.0, 1.0)
    assert router.fit.model is None


@settings(max_examples=40, deadline=None)
@given(
    loads=st.lists(st.tuples(st.integers(0, 64), st.integers(0, 20000)), min_size=1, max_size=6),
    deadline=st.floats(-10, 100),
)
def test_predicted_latency_returns_a_valid_index(loads: list[tuple[int, int]], deadline: float) -> None:
    router = PredictedLatencyRouter(window=64, min_samples=16, refit_every=8)
    views = _views(*(_Load(running=running, prefill=prefill) for running, prefill in loads))
    request = replace(REQUEST, deadline_s=deadline)
    assert 0 <= router.route(request, views, 0.0) < len(views)
    _observe(router, views, 0, latency_s=2.0, n=20)
    assert 0 <= router.route(replace(request, id="again"), views, 0.0) < len(views)


def test_predicted_latency_rejects_bad_and_unknown_parameters() -> None:
    with pytest.raises(ConfigError, match="unknown"):
        ROUTERS.build("predicted-latency", {"alpha": 1}, _context())
    with pytest.raises(ConfigError, match="min_samples"):
        ROUTERS.build("predicted-latency", {"min_samples": 2}, _context())
