"""The slosched stack (issue 15): its name, its one parameter block, and each of its parts on hand-built
views (ordering tiers and wake-ups, triage admission, deadline-sized budgets, the router's affinity and
completion factor, the job layer's triage), then a whole simulated run."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.core.request import PrefixId, Request
from slosched.core.views import JobView
from slosched.perf.linear import LinearStepCoefficients, LinearStepPredictor
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.pipeline import Cycle
from slosched.policies.cluster.routers.deadline_completion import (
    AffinityFilter,
    DeadlineCompletionRouter,
    PredictedCompletion,
)
from slosched.policies.cluster.routers.prism import PrismModel
from slosched.policies.engine.admission.triage import TriageAdmission, TriageParams
from slosched.policies.engine.batching.deadline_budget import DeadlineBudgetBatching, tightest_step_s
from slosched.policies.engine.ordering.least_slack import BEST_EFFORT, FEASIBLE, LeastSlackOrdering, call_target_s
from slosched.policies.job.critical_path import CriticalPathBudget
from slosched.policies.job.stage_budget import StageBudget, profiled_predictors
from slosched.policies.registry import PolicyContext
from slosched.policies.spec import PolicyPair, PolicyParams, PolicySpec
from slosched.sim.options import SimOptions
from slosched.sim.runner import simulate
from slosched.sim.views import InstanceSnapshot
from tests.conftest import make_cluster, make_instance, make_jobs
from tests.policies.engine.deadline_fakes import SPEC, FakeEngine, FakeSeq


def call(
    name: str,
    deadline_s: float = math.inf,
    budget_s: float | None = None,
    arrival_s: float = 0.0,
    prompt: int = 100,
    predicted: float = 50.0,
    tpot: float | None = None,
) -> Request:
    return Request(
        name,
        f"job-{name}",
        "s",
        "t",
        prompt,
        256,
        arrival_s,
        arrival_s,
        deadline_s=deadline_s,
        budget_s=budget_s,
        predicted_output_tokens=predicted,
        tpot_slo_s=tpot,
    )


# ---- the name and the parameter block ---------------------------------------------------------------------
def test_one_name_sets_router_engine_and_job_policy() -> None:
    pair = PolicyPair.parse("slosched")
    assert (pair.router, pair.engine, pair.name) == ("deadline-completion", "deadline-triage", "slosched")
    spec = PolicySpec.from_pair(pair, job="deadline")  # a stack's own job policy wins
    assert (spec.router, spec.engine.name, spec.job) == ("deadline-completion", "deadline-triage", "critical-path")


def test_the_parts_old_names_are_aliases_of_the_same_policies() -> None:
    context = PolicyContext((SPEC,), np.random.default_rng(0), HistoryOutputPredictor())
    old = PolicySpec.of("slosched", "slosched", "slosched").build(context)
    new = PolicySpec.of("deadline-completion", "deadline-triage", "critical-path").build(context)
    assert type(old.router) is type(new.router) and type(old.job) is type(new.job)
    old_engine, new_engine = old.new_engine(), new.new_engine()
    assert old_engine.name == "slosched" and new_engine.name == "deadline-triage"  # the name asked by
    for part in ("ordering", "admission", "batching"):
        assert type(getattr(old_engine, part)) is type(getattr(new_engine, part))


def test_the_stack_block_splits_per_layer_and_rejects_unknown_keys() -> None:
    params = PolicyParams(stack={"slosched": {"balance_rel": 2.0, "token_budget": 512, "triage_factor": 1.5}})
    spec = PolicySpec.from_pair(PolicyPair.parse("slosched"), params)
    assert spec.router_params == {"balance_rel": 2.0}
    assert spec.engine.params == {"token_budget": 512}
    assert spec.job_params == {"triage_factor": 1.5}
    with pytest.raises(ConfigError, match=r"policy_params\.stack\.slosched.*unknown \['alpha'\].*allowed"):
        PolicySpec.from_pair(PolicyPair.parse("slosched"), PolicyParams(stack={"slosched": {"alpha": 1}}))
    with pytest.raises(ConfigError, match=r"deadline-triage\.batching.*allowed"):
        bad = PolicyParams(stack={"slosched": {"batching": "sliced"}})
        context = PolicyContext((SPEC,), np.random.default_rng(0), HistoryOutputPredictor())
        PolicySpec.from_pair(PolicyPair.parse("slosched"), bad).build(context).new_engine()


def test_router_parameters_must_be_non_negative() -> None:
    context = PolicyContext((SPEC,), np.random.default_rng(0), HistoryOutputPredictor())
    bad = PolicyParams(stack={"slosched": {"balance_rel": -1}})
    with pytest.raises(ConfigError, match=r"deadline-completion\.balance_rel.*>= 0"):
        PolicySpec.from_pair(PolicyPair.parse("slosched"), bad).build(context)


def test_an_unknown_single_name_lists_the_stacks() -> None:
    with pytest.raises(ConfigError, match="nor a stack \\(slosched\\)"):
        PolicyPair.parse("slosch")


# ---- ordering ---------------------------------------------------------------------------------------------
def test_feasible_calls_go_first_by_their_own_target() -> None:
    order = LeastSlackOrdering()
    engine = FakeEngine(now_s=1.0)
    early_target = FakeSeq(call("a", deadline_s=100.0, budget_s=5.0))  # target 5
    late_target = FakeSeq(call("b", deadline_s=50.0))  # target 50
    hopeless = FakeSeq(call("c", deadline_s=1.001))  # cannot finish in a millisecond
    demoted = FakeSeq(call("d", deadline_s=100.0))
    demoted.request.best_effort = True
    keys = {seq.request.id: order.key(seq, engine) for seq in (early_target, late_target, hopeless, demoted)}
    assert keys["a"][0] == keys["b"][0] == FEASIBLE and keys["c"][0] == keys["d"][0] == BEST_EFFORT
    assert sorted(keys, key=keys.__getitem__) == ["a", "b", "c", "d"]
    assert call_target_s(call("x", deadline_s=10.0, budget_s=50.0)) == 10.0  # capped by the job deadline


def test_a_call_past_its_ttft_is_best_effort_until_it_has_a_first_token() -> None:
    order = LeastSlackOrdering()
    fresh = FakeSeq(call("fresh", arrival_s=9.0))
    stale = FakeSeq(call("stale", arrival_s=0.0))
    for seq in (fresh, stale):
        seq.request.ttft_slo_s = 1.0
    engine = FakeEngine(now_s=9.5, waiting=[stale, fresh])
    assert order.key(fresh, engine)[0] == FEASIBLE and order.key(stale, engine)[0] == BEST_EFFORT
    stale.first_token_s = 0.5  # preempted after its first token: the TTFT no longer binds
    assert order.key(stale, engine)[0] == FEASIBLE
    flip = order.next_change_s(FakeEngine(now_s=9.0, waiting=[fresh]))
    assert flip is not None and 9.0 < flip < 10.0


def test_slack_order_puts_the_longer_call_first_at_equal_targets() -> None:
    order = LeastSlackOrdering("slack")
    engine = FakeEngine(now_s=0.0)
    short = FakeSeq(call("short", deadline_s=60.0, predicted=10.0))
    long = FakeSeq(call("long", deadline_s=60.0, predicted=500.0))
    assert order.key(long, engine) < order.key(short, engine)


def test_next_change_is_the_earliest_flip_to_best_effort() -> None:
    order = LeastSlackOrdering()
    engine = FakeEngine(now_s=0.0)
    first, second = FakeSeq(call("a", deadline_s=20.0)), FakeSeq(call("b", deadline_s=10.0))
    engine.waiting = [first, second, FakeSeq(call("c"))]
    flip = order.next_change_s(engine)
    assert flip is not None and 0.0 < flip < 10.0
    assert order.key(second, FakeEngine(now_s=flip - 1e-6))[0] == FEASIBLE
    assert order.key(second, FakeEngine(now_s=flip + 1e-6))[0] == BEST_EFFORT
    assert order.next_change_s(FakeEngine(now_s=0.0, waiting=[FakeSeq(call("c"))])) is None


# ---- admission --------------------------------------------------------------------------------------------
def test_triage_admits_feasible_calls_and_holds_best_effort_to_its_share() -> None:
    admission = TriageAdmission(best_effort_share=0.25)  # 2 of SPEC's 8 slots
    late = [FakeSeq(call(f"late{i}", deadline_s=0.5)) for i in range(4)]
    engine = FakeEngine(now_s=1.0, waiting=late)
    assert [admission.admit(seq, engine) for seq in late] == [True, True, False, False]
    engine = FakeEngine(now_s=1.0, running=[FakeSeq(call(f"r{i}")) for i in range(6)])
    feasible = FakeSeq(call("ok", deadline_s=100.0))
    engine.waiting = [feasible, late[0]]
    assert admission.admit(feasible, engine) and not admission.admit(late[0], engine)


def relegated(name: str) -> FakeSeq:
    seq = FakeSeq(call(name, deadline_s=100.0))
    seq.request.best_effort = True  # the job layer relegated its job
    return seq


def test_triage_runs_relegated_jobs_only_beside_nothing_that_can_still_count() -> None:
    admission = TriageAdmission(best_effort_share=0.5)  # 4 of SPEC's 8 slots: the share is not what stops it
    waiting = [relegated(f"rel{i}") for i in range(3)]
    busy = FakeEngine(now_s=1.0, waiting=list(waiting), running=[FakeSeq(call("ok", deadline_s=100.0))])
    assert [admission.admit(seq, busy) for seq in waiting] == [False, False, False]
    # Beside only relegated work (or nothing), up to the share.
    idle = FakeEngine(now_s=2.0, waiting=list(waiting), running=[relegated("running")])
    assert [admission.admit(seq, idle) for seq in waiting] == [True, True, True]
    # A feasible call admitted ahead of them in the same pass counts as running.
    feasible = FakeSeq(call("new", deadline_s=100.0))
    engine = FakeEngine(now_s=3.0, waiting=[feasible, *waiting])
    assert admission.admit(feasible, engine) and not admission.admit(waiting[0], engine)
    # A call the engine demoted on its own (past saving, its job not relegated) keeps the share rule.
    late = FakeSeq(call("late", deadline_s=0.5))
    engine = FakeEngine(now_s=4.0, waiting=[late], running=[FakeSeq(call("ok2", deadline_s=100.0))])
    assert admission.admit(late, engine)
    # relegated_alone off: relegated calls get the share rule like any best-effort call.
    sharing = TriageAdmission(best_effort_share=0.5, relegated_alone=False)
    busy = FakeEngine(now_s=5.0, waiting=list(waiting), running=[FakeSeq(call("ok3", deadline_s=100.0))])
    assert [sharing.admit(seq, busy) for seq in waiting] == [True, True, True]


def test_the_strict_tier_engages_only_once_relegated_work_crowds_the_instance() -> None:
    """While relegated calls number no more than ``relegated_strict_from`` per call that can still count
    (running and waiting), they take the share; past it, the strict tier holds them."""
    admission = TriageAdmission(best_effort_share=0.5)
    rel = relegated("rel")
    running = [FakeSeq(call("ok", deadline_s=100.0)), FakeSeq(call("ok2", deadline_s=100.0))]
    assert admission.admit(rel, FakeEngine(now_s=1.0, waiting=[rel], running=list(running)))  # 1 against 2
    crowd = [relegated(f"rel{i}") for i in range(3)]
    engine = FakeEngine(now_s=2.0, waiting=list(crowd), running=list(running))  # 3 against 2
    assert [admission.admit(seq, engine) for seq in crowd] == [False, False, False]
    # A lower threshold engages sooner; none engages always (the rule before it).
    for strict_from in (0.4, None):
        strict = TriageAdmission(best_effort_share=0.5, relegated_strict_from=strict_from)
        assert not strict.admit(rel, FakeEngine(now_s=3.0, waiting=[rel], running=list(running)))
    with pytest.raises(ConfigError, match="relegated_strict_from"):
        TriageParams(relegated_strict_from=-1.0)


# ---- batching ---------------------------------------------------------------------------------------------
def test_tightest_step_reads_tpot_slos_and_deadline_slack() -> None:
    running = [
        FakeSeq(call("tpot", tpot=0.03)),
        FakeSeq(call("slack", deadline_s=11.0, predicted=101.0), num_output_tokens=1),  # 10 s / 100 tokens
        FakeSeq(call("late", deadline_s=0.5)),  # its slack is gone: no bound
        FakeSeq(call("free")),
    ]
    assert tightest_step_s(running, 1.0) == pytest.approx(0.03)
    assert tightest_step_s(running[1:], 1.0) == pytest.approx(0.1)
    assert tightest_step_s(running[2:], 1.0) == math.inf


def test_a_call_no_budget_can_save_or_of_a_relegated_job_bounds_no_step() -> None:
    """Steps sized for a call past saving would only starve the prefills of calls that can still count."""
    hopeless = FakeSeq(call("hopeless", deadline_s=1.1, predicted=101.0), num_output_tokens=1)  # 1 ms a step
    savable = FakeSeq(call("savable", deadline_s=11.0, predicted=101.0), num_output_tokens=1)  # 100 ms a step
    assert tightest_step_s([hopeless, savable], 1.0) == pytest.approx(0.001)  # no floor: the old rule
    assert tightest_step_s([hopeless, savable], 1.0, floor_s=0.01) == pytest.approx(0.1)
    assert tightest_step_s([hopeless], 1.0, floor_s=0.01) == math.inf
    relegated = FakeSeq(replace(call("relegated", deadline_s=1.1, predicted=101.0), best_effort=True))
    assert tightest_step_s([relegated, savable], 1.0) == pytest.approx(0.1)
    # A TPOT SLO bounds the step whatever the floor: the batch's own decode step is what it is judged on.
    assert tightest_step_s([FakeSeq(call("tpot", tpot=0.005))], 1.0, floor_s=0.01) == pytest.approx(0.005)


@settings(max_examples=40, deadline=None)
@given(bound=st.floats(1e-4, 10.0), tighter=st.floats(0.01, 1.0), decoding=st.integers(1, 8))
def test_budget_fits_the_bound_and_shrinks_with_it(bound: float, tighter: float, decoding: int) -> None:
    batching = DeadlineBudgetBatching(token_budget=2048, min_budget=64, margin=1.0)
    engine = FakeEngine(now_s=0.0, running=[FakeSeq(call(f"r{i}")) for i in range(decoding)])
    loose, tight = batching.sized(engine, bound, 2048), batching.sized(engine, bound * tighter, 2048)
    assert 64 <= tight <= loose <= 2048
    predict = engine.step_predictor.predict_s
    if loose > 64:  # above the floor, the predicted step fits the bound
        assert predict(max(loose - decoding, 0), 0, decoding, decoding * 512) <= bound + 1e-12


def test_plan_without_bounds_is_the_ceiling() -> None:
    batching = DeadlineBudgetBatching(token_budget=1024, min_budget=64, margin=0.8)
    engine = FakeEngine(now_s=0.0, waiting=[FakeSeq(call("w"))], running=[FakeSeq(call("r"))])
    assert batching.plan(engine).token_budget == 1024
    engine.running = [FakeSeq(call("r", tpot=1e-6))]  # unreachable: the floor keeps prefill moving
    assert batching.plan(engine).token_budget == 64


# ---- router -----------------------------------------------------------------------------------------------
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


# ---- job layer --------------------------------------------------------------------------------------------
def _job(deadline_s: float, template: str = "text2sql-chess", stage: str = "IR1") -> JobView:
    return JobView("j", "workflow", template, 0.0, deadline_s, deadline_s, stage, ())


def test_job_layer_budgets_as_stage_budget_and_marks_hopeless_jobs() -> None:
    predictors = profiled_predictors(make_cluster(1, 1))
    stack, hexgen = CriticalPathBudget(predictors), StageBudget(predictors)
    ours, theirs = [call("a", predicted=80.0)], [call("a", predicted=80.0)]
    stack.decide(_job(600.0), ours, 0.0).apply(ours)
    hexgen.decide(_job(600.0), theirs, 0.0).apply(theirs)
    assert ours[0].budget_s == theirs[0].budget_s and not ours[0].best_effort
    late = [call("b", predicted=80.0)]
    stack.decide(_job(0.01), late, 0.0).apply(late)
    assert late[0].best_effort


# ---- a whole run ------------------------------------------------------------------------------------------
def test_a_simulated_run_ends_every_job_once_and_is_deterministic() -> None:
    instances = (make_instance("a100-0"), make_instance("a6000-0", gpu="A6000"))
    jobs = make_jobs(60, rate=6.0, seed=3)
    options = SimOptions(slo_scale=4.0)
    first = simulate(instances, jobs, PolicyPair.parse("slosched"), 5, options)
    second = simulate(instances, jobs, PolicyPair.parse("slosched"), 5, options)
    assert first.policy == "slosched" and len(first.jobs) == len(jobs)
    assert [(j.id, j.outcome, j.finish_s) for j in first.jobs] == [(j.id, j.outcome, j.finish_s) for j in second.jobs]
