"""The slosched stack (issue 15): its name, its one parameter block, and each of its parts on hand-built
views (ordering tiers and wake-ups, triage admission, deadline-sized budgets, the job layer's triage; the
router's parts are in ``tests/policies/cluster/test_deadline_completion.py``), then a whole simulated run."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.core.views import JobView
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.engine.admission.triage import TriageAdmission, TriageParams
from slosched.policies.engine.batching.deadline_budget import DeadlineBudgetBatching, tightest_step_s
from slosched.policies.engine.ordering.least_slack import BEST_EFFORT, FEASIBLE, LeastSlackOrdering, call_target_s
from slosched.policies.job.critical_path import CriticalPathBudget
from slosched.policies.job.stage_budget import StageBudget, profiled_predictors
from slosched.policies.registry import PolicyContext
from slosched.policies.spec import PolicyPair, PolicyParams, PolicySpec
from slosched.sim.options import SimOptions
from slosched.sim.runner import simulate
from tests.conftest import make_cluster, make_instance, make_jobs
from tests.policies.engine.deadline_fakes import SPEC, FakeEngine, FakeSeq, call


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
