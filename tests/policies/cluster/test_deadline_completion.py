"""The slosched stack's router ``deadline-completion`` on hand-built views: prefix affinity that holds while
balanced and yields a late home, the predicted-completion factor, TPOT residents, relegated work not seen
as queue."""

from __future__ import annotations

import math

from slosched.core.request import PrefixId, Request
from slosched.perf.linear import LinearStepCoefficients, LinearStepPredictor
from slosched.policies.cluster.pipeline import Cycle
from slosched.policies.cluster.routers.deadline_completion import (
    AffinityFilter,
    DeadlineCompletionRouter,
    PredictedCompletion,
)
from slosched.policies.cluster.routers.prism import PrismModel
from slosched.sim.views import InstanceSnapshot
from tests.policies.engine.deadline_fakes import SPEC, call


def _view(
    index: int, running: int = 0, prefill: int = 0, pending: int = 0, step_s: float | None = None
) -> InstanceSnapshot:
    """``step_s``: a step predictor charging that much per step and nothing per sequence or token."""
    predictor = LinearStepPredictor(LinearStepCoefficients(step_s, 0.0, 0.0, 0.0)) if step_s else LinearStepPredictor()
    return InstanceSnapshot(
        index=index,
        spec=SPEC,
        snapshot_s=0.0,
        num_running=running,
        num_waiting=pending,
        waiting_prefill_tokens=prefill,
        outstanding_decode_tokens=0.0,
        num_free_kv_blocks=5000,
        num_kv_blocks=5000,
        step_predictor=predictor,
    )


def _prefixed(name: str, deadline_s: float = math.inf) -> Request:
    request = call(name, deadline_s=deadline_s, prompt=2048)
    request.prefix = PrefixId(7, 100, 1, 28)  # 1,600 of 2,048 prompt tokens shared with template 7
    return request


def test_affinity_holds_home_while_balanced_and_lets_go_past_the_bound() -> None:
    completion = PredictedCompletion(PrismModel())
    affinity = AffinityFilter(completion, min_match=0.3, balance_rel=2.0, balance_abs_s=0.0, yields=False)
    views = [_view(0), _view(1)]
    completion.on_routed(Cycle(_prefixed("a"), 0.0), views[1])  # the template now lives on instance 1
    assert affinity.filter(Cycle(_prefixed("b"), 0.0), views) == [1]
    busy = [_view(0, pending=1), _view(1, prefill=200_000, pending=50)]
    assert affinity.filter(Cycle(_prefixed("c"), 0.0), busy) == [0, 1]  # home far past the bound
    assert affinity.filter(Cycle(_prefixed("d", deadline_s=1e6), 0.0), busy) == [1]  # ... yet meets the target


def test_affinity_yields_a_late_home_only_where_another_instance_is_in_time() -> None:
    completion = PredictedCompletion(PrismModel())
    holding = AffinityFilter(completion, min_match=0.3, balance_rel=4.0, balance_abs_s=30.0, yields=False)
    yielding = AffinityFilter(completion, min_match=0.3, balance_rel=4.0, balance_abs_s=30.0)
    views = [_view(0), _view(1, prefill=20_000, pending=4)]
    completion.on_routed(Cycle(_prefixed("a"), 0.0), views[1])  # the template lives on the busier instance 1
    probe = _prefixed("p", deadline_s=1e6)
    states = completion.states(Cycle(probe, 0.0), views)
    away, home = (completion.latency_s(probe, view, state) for view, state in zip(views, states, strict=True))
    assert away < home
    between = _prefixed("b", deadline_s=(away + home) / 2)
    assert holding.filter(Cycle(between, 0.0), views) == [1]  # home within the load bound: held, late or not
    assert yielding.filter(Cycle(between, 0.0), views) == [0, 1]  # late at home, in time away: every instance
    hopeless = _prefixed("h", deadline_s=away / 2)
    assert yielding.filter(Cycle(hopeless, 0.0), views) == [1]  # late everywhere: the prefix holds (overload)
    assert yielding.filter(Cycle(_prefixed("l", deadline_s=2 * home), 0.0), views) == [1]  # in time at home


def test_completion_factor_is_in_unit_interval_and_prefers_the_faster_path() -> None:
    completion = PredictedCompletion(PrismModel())
    views = [_view(0, prefill=50_000, pending=20), _view(1)]
    scores = completion.score(Cycle(call("x", deadline_s=5.0), 0.0), views)
    assert all(0.0 <= s <= 1.0 for s in scores) and scores[1] > scores[0]
    assert completion.score(Cycle(call("y", deadline_s=5.0), 10.0), views) == [1.0, 1.0]  # late everywhere
    assert DeadlineCompletionRouter().route(call("z", deadline_s=5.0), views, 0.0) == 1


def test_a_tight_tpot_call_is_judged_by_the_step_it_would_join_not_by_an_idle_batch() -> None:
    # An idle slow GPU (20 ms steps) and a busy fast one (8 ms): PRISM's L_e is 0 on the idle one, which
    # sent FlowGPT's 12 ms calls to idle A6000s at light load; the stack costs the step the call joins.
    views = [_view(0, step_s=0.020), _view(1, running=30, step_s=0.008)]
    request = call("flow", tpot=0.012)
    scores = PredictedCompletion(PrismModel()).score(Cycle(request, 0.0), views)
    assert scores[1] > 0.5 > scores[0]
    prism_latency = [PrismModel().factors(request, state)[0] for state in PrismModel().states(views)]
    assert prism_latency[0] > prism_latency[1]  # the baseline's factor prefers the idle slow GPU


def test_a_loose_call_keeps_off_an_instance_whose_residents_need_a_tighter_tpot() -> None:
    completion = PredictedCompletion(PrismModel())
    views = [_view(0, running=10, step_s=0.010), _view(1, running=10, step_s=0.010)]
    tight = call("flow", tpot=0.012)
    completion.on_routed(Cycle(tight, 0.0), views[0])  # a 12 ms call now decodes on instance 0
    loose = call("azure", tpot=0.030)
    scores = completion.score(Cycle(loose, 1.0), views)
    assert scores[1] > scores[0]  # 10 / 30 ms of its own SLO there, 10 / 12 ms of the resident's here
    completion.on_request_finished(0, tight, 1.0, 1.0)
    scores = completion.score(Cycle(loose, 2.0), views)
    assert scores[0] == scores[1]
    no_tpot = call("sql", deadline_s=100.0)  # a deadline call crowds residents out just the same
    completion.on_routed(Cycle(tight, 3.0), views[0])
    scores = completion.score(Cycle(no_tpot, 3.0), views)
    assert scores[1] > scores[0]


def test_a_call_that_can_still_count_does_not_see_relegated_work_queued_ahead() -> None:
    # Instance 0 holds a long queue of relegated calls (the engine runs them only beside nothing feasible),
    # instance 1 a shorter queue of feasible ones: the feasible call is served first on instance 0.
    views = [_view(0), _view(1)]
    for index in range(40):
        relegated_call = call(f"rel{index}", deadline_s=100.0, prompt=4000)
        relegated_call.best_effort = True
        views[0].note_routed(relegated_call)
    for index in range(10):
        views[1].note_routed(call(f"ok{index}", deadline_s=100.0, prompt=4000))
    completion = PredictedCompletion(PrismModel())
    feasible = call("x", deadline_s=5.0)
    scores = completion.score(Cycle(feasible, 0.0), views)
    assert scores[0] > scores[1]
    # A relegated call queues behind all of it: it meets the whole queue and goes where the queue is shorter.
    late = call("late", deadline_s=5.0)
    late.best_effort = True
    scores = PredictedCompletion(PrismModel()).score(Cycle(late, 0.0), views)
    assert scores[1] > scores[0]


def test_the_load_and_kv_factors_do_not_see_relegated_work_queued_ahead_either() -> None:
    # Two relegated calls of 38k tokens starve in instance 0's queue (80k tokens of KV); instance 1 holds nothing.
    # For a call that can still count the two look alike in every factor (PRISM's own columns count them).
    views = [_view(0), _view(1)]
    for index in range(2):
        relegated_call = call(f"rel{index}", deadline_s=100.0, prompt=38_000)
        relegated_call.best_effort = True
        views[0].note_routed(relegated_call)
    router = DeadlineCompletionRouter()
    feasible = call("x", deadline_s=50.0)
    columns = router.completion.factor_columns(Cycle(feasible, 0.0), views)
    for column in columns:
        assert column[0] == column[1]
    raw = router.model.columns(Cycle(feasible, 0.0), views)
    assert raw[1][0] < raw[1][1] and raw[2][0] < raw[2][1]  # what PRISM's columns saw: loaded, short of KV
    # A relegated call meets the whole queue in the load and KV factors too.
    late = call("late", deadline_s=50.0)
    late.best_effort = True
    load, kv = router.completion.factor_columns(Cycle(late, 0.0), views)[1:]
    assert load[0] < load[1] and kv[0] < kv[1]
