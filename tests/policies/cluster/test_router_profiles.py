"""Every registered router, now a pipeline profile, makes the decisions the hand-rolled router made
(``router_reference``): random instance views that evolve as requests are routed and finish, random
candidate subsets, random sessions, SLOs and prefixes; the same choice at every step."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.request import PrefixId, Request
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.cluster.base import Router
from slosched.policies.cluster.pipeline import dense_rank, min_max
from slosched.policies.cluster.routers.cache_aware import CacheAwareRouter
from slosched.policies.cluster.routers.latency_lagging import LatencyLaggingRouter
from slosched.policies.cluster.routers.least_loaded import LeastLoadedRouter
from slosched.policies.cluster.routers.least_tokens import LeastTokensRouter
from slosched.policies.cluster.routers.power_of_two import PowerOfTwoRouter
from slosched.policies.cluster.routers.predicted_latency import PredictedLatencyRouter
from slosched.policies.cluster.routers.prism import PrismRouter
from slosched.policies.cluster.routers.random import RandomRouter
from slosched.policies.cluster.routers.round_robin import RoundRobinRouter
from slosched.policies.cluster.routers.session_affinity import SessionAffinityRouter
from slosched.policies.cluster.routers.weighted_static import WeightedStaticRouter
from slosched.policies.cluster.routers.workload_balanced import WorkloadBalancedRouter
from slosched.policies.engine.nexus_state import EngineState
from slosched.sim.views import InstanceSnapshot
from tests.conftest import make_instance
from tests.policies.cluster import router_reference as ref

MAX_INSTANCES = 6
SPEC = make_instance("i")


class _Snapshot(InstanceSnapshot):
    """A snapshot whose prefix cache holds ``cached`` tokens of every prompt."""

    __slots__ = ("cached",)
    cached: int

    def cached_prefix_tokens(self, request: Request) -> int:
        return min(self.cached, request.prompt_tokens)


_tokens = st.integers(0, 50_000)
_decode = st.one_of(st.integers(0, 20_000).map(float), st.floats(0, 20_000, allow_subnormal=False))
_exported = st.one_of(
    st.just(None),
    st.builds(
        EngineState,
        st.floats(0, 0.5),
        st.integers(0, 40_000).map(float),
        st.integers(0, 64).map(float),
        st.floats(-5_000, 500_000),
        st.sampled_from([math.inf, 20_000.0, 80_000.0, 250_000.0]),
    ),
)
_view = st.tuples(st.integers(0, 40), st.integers(0, 40), _tokens, _decode, st.integers(0, 4096), _exported)
_request = st.tuples(
    st.integers(1, 4000),  # prompt tokens
    st.floats(1, 800),  # predicted output tokens
    st.sampled_from([None, "s0", "s1", "s2"]),
    st.sampled_from([None, 0.02, 0.05]),  # TPOT SLO
    st.sampled_from([None, 0.5, 2.0]),  # TTFT SLO
    st.sampled_from([math.inf, 3.0, 20.0]),  # deadline after arrival
    st.integers(0, 3),  # shared prefix template (0: none)
)
_step = st.tuples(_request, st.lists(st.booleans(), min_size=MAX_INSTANCES, max_size=MAX_INSTANCES), st.floats(0, 5))


def _views(raw: list[tuple[int, int, int, float, int, EngineState | None]]) -> list[_Snapshot]:
    views = []
    for index, (running, waiting, prefill, decode, cached, exported) in enumerate(raw):
        view = _Snapshot(
            index=index,
            spec=SPEC,
            snapshot_s=0.0,
            num_running=running,
            num_waiting=waiting,
            waiting_prefill_tokens=prefill,
            outstanding_decode_tokens=decode,
            num_free_kv_blocks=2000 - 40 * index,
            num_kv_blocks=2000,
            step_predictor=LinearStepPredictor(),
            exported=exported.to_mapping() if exported is not None else {},
        )
        view.cached = cached
        views.append(view)
    return views


def _make_request(number: int, now_s: float, raw: tuple) -> Request:
    prompt, predicted, session, tpot, ttft, deadline, template = raw
    prefix = PrefixId(template, prompt // 32, number, 0) if template else PrefixId(0, 0, number, 0)
    return Request(
        id=f"r{number}",
        job_id=f"j{number}",
        stage="s",
        template=f"t{template}",
        prompt_tokens=prompt,
        max_output_tokens=1024,
        arrival_s=now_s,
        job_arrival_s=now_s,
        deadline_s=now_s + deadline,
        session_id=session,
        prefix=prefix,
        predicted_output_tokens=predicted,
        ttft_slo_s=ttft,
        tpot_slo_s=tpot,
    )


@dataclass
class _Pair:
    reference: Router
    profile: Router


def _run(pair: _Pair, views: list[_Snapshot], steps: list) -> None:
    """Route every step through both routers; the chosen view takes the request, then may finish one."""
    now_s = 0.0
    routed: list[tuple[int, Request]] = []
    for number, (raw, mask, advance_s) in enumerate(steps):
        now_s += advance_s
        request = _make_request(number, now_s, raw)
        candidates = [view for view, keep in zip(views, mask, strict=False) if keep] or views
        expected = pair.reference.route(request, candidates, now_s)
        assert pair.profile.route(request, candidates, now_s) == expected, f"step {number}"
        candidates[expected].note_routed(request)
        routed.append((candidates[expected].index, request))
        if number % 2 and routed:  # a completion feeds the learning routers
            index, done = routed.pop(0)
            for router in (pair.reference, pair.profile):
                finished = getattr(router, "on_request_finished", None)
                if finished is not None:
                    finished(index, done, 0.1 + advance_s + done.prompt_tokens / 5000, now_s)


_PARAMS = st.tuples(st.floats(0, 1), st.floats(0.5, 3), st.floats(0, 3), st.integers(0, 2**32))

PAIRS: dict[str, Callable[[tuple[float, float, float, int], int], _Pair]] = {
    "least-tokens": lambda p, n: _Pair(ref.RefLeastTokensRouter(), LeastTokensRouter()),
    "least-loaded": lambda p, n: _Pair(ref.RefLeastLoadedRouter(), LeastLoadedRouter()),
    "round-robin": lambda p, n: _Pair(ref.RefRoundRobinRouter(n), RoundRobinRouter(n)),
    "random": lambda p, n: _Pair(
        ref.RefRandomRouter(np.random.default_rng(p[3])), RandomRouter(np.random.default_rng(p[3]))
    ),
    "session-affinity": lambda p, n: _Pair(ref.RefSessionAffinityRouter(), SessionAffinityRouter()),
    "latency-lagging": lambda p, n: _Pair(ref.RefLatencyLaggingRouter(p[1]), LatencyLaggingRouter(p[1])),
    "weighted-static": lambda p, n: _Pair(
        ref.RefWeightedStaticRouter([1 + p[2] * i for i in range(n)]),
        WeightedStaticRouter([1 + p[2] * i for i in range(n)]),
    ),
    "workload-balanced": lambda p, n: _Pair(
        ref.RefWorkloadBalancedRouter(p[0], 100.0, p[1]), WorkloadBalancedRouter(p[0], 100.0, p[1])
    ),
    "power-of-two": lambda p, n: _Pair(ref.RefPowerOfTwoRouter(p[3]), PowerOfTwoRouter(p[3])),
    "cache-aware": lambda p, n: _Pair(
        ref.RefCacheAwareRouter(p[0], 10 * p[2], 1 + p[2]), CacheAwareRouter(p[0], 10 * p[2], 1 + p[2])
    ),
    "predicted-latency": lambda p, n: _Pair(ref.RefPredictedLatencyRouter(16, 5, 2), PredictedLatencyRouter(16, 5, 2)),
    # PRISM: weights free except the affinity's, bonus a power of two (exact; see prism's docstring).
    "prism": lambda p, n: _Pair(
        ref.RefPrismRouter(w_latency=p[1], w_load=p[2], w_kv=p[0] * 2, affinity_bonus=2.0 ** (1 + p[3] % 3)),
        PrismRouter(w_latency=p[1], w_load=p[2], w_kv=p[0] * 2, affinity_bonus=2.0 ** (1 + p[3] % 3)),
    ),
    "prism-defaults": lambda p, n: _Pair(ref.RefPrismRouter(), PrismRouter()),
    "prism-view-peak": lambda p, n: _Pair(ref.RefPrismRouter(unfitted_peak="view"), PrismRouter(unfitted_peak="view")),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
@settings(max_examples=30, deadline=None)
@given(
    raw_views=st.lists(_view, min_size=1, max_size=MAX_INSTANCES),
    steps=st.lists(_step, min_size=1, max_size=30),
    params=_PARAMS,
)
def test_profile_decides_as_the_reference_router(name: str, raw_views: list, steps: list, params: tuple) -> None:
    views = _views(raw_views)
    _run(PAIRS[name](params, len(views)), views, steps)


def test_every_registered_router_has_a_reference() -> None:
    from slosched.policies.cluster.base import ROUTERS

    # ``pipeline`` and ``deadline-completion`` were born as profiles: no hand-rolled router to hold them to.
    born_as_profiles = {"pipeline", "deadline-completion"}
    assert set(ROUTERS.registered()) - born_as_profiles <= {name.split("-defaults")[0] for name in PAIRS} | {"prism"}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(-1e12, 1e12), st.integers(-(2**40), 2**40).map(float)), min_size=1, max_size=12))
def test_min_max_is_strictly_order_preserving(keys: list[float]) -> None:
    scores = min_max(keys)
    assert all(0.0 <= score <= 1.0 for score in scores)
    for i, a in enumerate(keys):
        for j, b in enumerate(keys):
            assert (a < b) == (scores[i] > scores[j]) and (a == b) == (scores[i] == scores[j])


def test_min_max_separates_keys_that_rounding_merges() -> None:
    keys = [1000.0, 0.3, 0.30000000000000004, 0.0]  # 1000 - 0.3 rounds like 1000 - 0.30000000000000004
    scores = min_max(keys)
    assert scores[3] == 1.0 and scores[0] == 0.0 and scores[1] > scores[2]
    bottom = min_max([0.0, 5e-324, -2.0])  # two keys round to score 0: pulled apart upwards
    assert bottom[2] == 1.0 and bottom[1] == 0.0 < bottom[0] < 1.0


@given(st.lists(st.tuples(st.integers(0, 3), st.floats(0, 10)), min_size=1, max_size=8))
def test_dense_rank_orders_lexicographic_keys(keys: list[tuple[int, float]]) -> None:
    scores = dense_rank(keys)
    for i, a in enumerate(keys):
        for j, b in enumerate(keys):
            assert (a < b) == (scores[i] > scores[j])
