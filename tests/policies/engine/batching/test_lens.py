"""LENS: bisection monotonicity, target selection on each branch, progress, state export."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slosched.bench.overhead import FakeEngine, FakeSeq, _request
from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.views import StepMode
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.perf.structural import StructuralParams, StructuralStepModel
from slosched.policies.engine.base import ENGINE_PRESETS
from slosched.policies.engine.batching.lens import LensBatching
from slosched.policies.engine.batching.lens_deadline import call_deadline_s, first_token_bound_s, step_bound_s
from slosched.policies.engine.batching.lens_search import BatchState, greedy_batch, largest_budget, search, step_time_s
from slosched.policies.engine.batching.lens_target import Branch, TtftLine, choose_target, fit_line, wait_pressure
from slosched.policies.engine.nexus_state import EngineState
from slosched.policies.registry import PolicyContext

PARAMS = StructuralParams(
    tau0_s=0.006,
    w0=0.0,
    ws=1.0,
    tau_b_s=1e-5,
    tau_s_s=0.0,
    tau_c_s=5e-8,
    tau_a_s=1e-9,
    pmax=40_000.0,
    k_b=1.0,
    k_s=1 / 500,
)


@pytest.mark.parametrize("b", [1, 17, 200])
def test_budget_is_monotone_in_the_target_and_fits_it(b: int) -> None:
    budgets = [largest_budget(PARAMS, b, b, 8192, target, 500.0) for target in np.linspace(0.005, 0.4, 40)]
    assert budgets == sorted(budgets)
    for target, budget in zip(np.linspace(0.005, 0.4, 40), budgets, strict=True):
        extra = budget - b
        if budget > b:  # the floor is returned even when nothing fits
            assert step_time_s(PARAMS, b, budget, 0.0, extra * (500 + 0.5 * extra)) <= target + 1e-12


def test_bisection_is_bounded_and_within_resolution() -> None:
    exact = largest_budget(PARAMS, 1, 1, 8192, 0.05, 0.0, iterations=32)
    coarse = largest_budget(PARAMS, 1, 1, 8192, 0.05, 0.0, iterations=10)
    assert coarse <= exact <= coarse + 8192 / 2**10 + 1


def test_target_branches() -> None:
    line = TtftLine(a_s=3.0, b=20.0)  # ttft(td) = 3 - 20 td: TTFT SLO 1 s needs td >= 0.1
    low = choose_target(line, 1.0, 0.2, mean_decode_tokens=200, min_step_s=0.01, max_step_s=0.5, pressure=0.0)
    assert low.branch is Branch.LOW and low.td_s == pytest.approx(0.1) and low.high_s == pytest.approx(0.2)
    high = choose_target(line, 1.0, 0.2, mean_decode_tokens=5, min_step_s=0.01, max_step_s=0.5, pressure=0.0)
    assert high.branch is Branch.HIGH and high.td_s == pytest.approx(0.2)
    relaxed = choose_target(line, 1.0, 0.2, mean_decode_tokens=200, min_step_s=0.01, max_step_s=0.5, pressure=0.5)
    assert relaxed.branch is Branch.RELAXED and relaxed.td_s == pytest.approx(0.15)
    infeasible = choose_target(line, 1.0, 0.05, mean_decode_tokens=200, min_step_s=0.01, max_step_s=0.5, pressure=0)
    assert infeasible.branch is Branch.INFEASIBLE and infeasible.td_s == pytest.approx(0.05)
    safety = choose_target(TtftLine(0.5, 20.0), 1.0, 0.2, 200, min_step_s=0.03, max_step_s=0.5, pressure=0)
    assert safety.td_s == pytest.approx(0.03)  # bounded below by the safety minimum
    no_tpot = choose_target(line, None, None, 5, min_step_s=0.01, max_step_s=0.5, pressure=0)
    assert no_tpot.td_s == pytest.approx(0.5)


def test_line_and_pressure() -> None:
    line = fit_line(0.01, 2.0, 0.11, 1.0)
    assert line.b == pytest.approx(10.0) and line.a_s - line.b * 0.11 == pytest.approx(1.0)
    assert fit_line(0.01, 1.0, 0.11, 2.0).b == 0.0
    assert wait_pressure(0.0, 1.0, 0.5) == 0.0 and wait_pressure(1.0, None, 0.5) == 0.0
    assert 0.0 < wait_pressure(0.2, 1.0, 0.5) < wait_pressure(1.0, 1.0, 0.5) < 1.0
    # Without a TTFT SLO the fallback time scale still relaxes whenever requests wait.
    assert wait_pressure(1.0, None, 0.5, fallback_s=1.0) == pytest.approx(wait_pressure(1.0, 1.0, 0.5))


def test_greedy_takes_running_first_then_waiting_fcfs_chunking_the_last() -> None:
    state = BatchState(3, 2, 1000.0, 10, 8192, [100], [50], [300, 400, 500], [0, 0, 0])
    admitted, tokens, _ = greedy_batch(state, b=5, s=2 + 100 + 300 + 50)
    assert (admitted, tokens) == (2, 452)
    assert greedy_batch(state, b=3, s=8192)[:2] == (0, 102)  # no free slot: running only


def test_search_closest_to_target_admits_more_for_a_longer_target() -> None:
    state = BatchState(4, 4, 4000.0, 64, 8192, [], [], [200] * 40, [0] * 40)
    short = search(PARAMS, state, 0.012, 0.05)
    longer = search(PARAMS, state, 0.08, 0.05)
    assert short.num_admitted <= longer.num_admitted and short.token_budget <= longer.token_budget
    assert abs(longer.predicted_s - 0.08) <= 0.1 * 0.08


def _lens_engine(waiting: int = 64) -> tuple[LensBatching, FakeEngine]:
    engine = FakeEngine(InstanceSpec(name="h", gpu="H100", model="Llama-3-8B", max_running=128), [], [])
    rng = np.random.default_rng(0)
    for index in range(32):
        request = _request(rng, index, engine.now_s)
        engine.running_seqs.append(FakeSeq(request, request.prompt_tokens, request.prompt_tokens, 10, 99.0))
    for index in range(32, 32 + waiting):
        request = _request(rng, index, engine.now_s)
        engine.waiting.append(FakeSeq(request, request.prompt_tokens, 0, 0, request.arrival_s))
    return LensBatching(model=StructuralStepModel(PARAMS)), engine


def test_plan_stays_within_instance_limits_and_never_below_the_cohort() -> None:
    lens, engine = _lens_engine()
    plan = lens.plan(engine)
    assert plan.mode is StepMode.MIXED and plan.chunked_prefill
    assert 32 < plan.token_budget <= engine.spec.max_batched_tokens
    assert 32 <= plan.max_running <= engine.spec.max_running
    assert lens.last_target is not None and lens.time_invariant is False


def test_plan_guarantees_prefill_progress_under_an_impossible_target() -> None:
    lens, engine = _lens_engine()
    lens.tpot_slo_s = 1e-6
    for seq in engine.running_seqs + engine.waiting:
        seq.request.tpot_slo_s = 1e-6
    plan = lens.plan(engine)
    assert plan.token_budget >= 32 + lens.min_prefill_tokens and plan.max_running >= 33


def test_exported_state_is_correct() -> None:
    lens, engine = _lens_engine(waiting=3)
    lens.plan(engine)
    state = EngineState.from_mapping(lens.export_state(engine))
    assert state.pending_requests == 32 + 3
    assert state.pending_prefill_tokens == sum(seq.num_prompt_tokens for seq in engine.waiting)
    queued = sum(seq.num_prompt_tokens + seq.request.predicted_output_tokens for seq in engine.waiting)
    assert state.free_kv_tokens == engine.num_free_kv_blocks * 16 - queued
    assert state.latency_s == pytest.approx(lens.last_choice.predicted_s)  # type: ignore[union-attr]
    assert state.peak_tokens_per_s == math.inf  # no shape fit yet: unknown, routers score it neutrally
    lens.model.num_shape_fits = 1
    fitted = EngineState.from_mapping(lens.export_state(engine))
    assert fitted.peak_tokens_per_s == pytest.approx(8192 / step_time_s(PARAMS, 1, 8192, 0, 0))
    assert EngineState.from_json(state.to_json()) == state
    idle = FakeEngine(engine.spec, [], [])
    assert lens.engine_state(idle).latency_s == 0.0


def test_engine_state_rejects_bad_documents() -> None:
    with pytest.raises(ConfigError, match="latency_s"):
        EngineState.from_mapping({"latency_s": "fast"})
    assert EngineState.from_json(EngineState(0.1, 1, 1, 1, math.inf).to_json()).peak_tokens_per_s == math.inf


def test_preset_and_parameter_errors() -> None:
    context = PolicyContext((), np.random.default_rng(0), HistoryOutputPredictor())
    engine = ENGINE_PRESETS.build("lens", {"tpot_slo_s": 0.05}, context)
    assert isinstance(engine.batching, LensBatching) and engine.observers == [engine.batching]
    with pytest.raises(ConfigError, match="tolerance"):
        ENGINE_PRESETS.build("lens", {"tolerance": 2.0}, context)
    with pytest.raises(ConfigError, match="allowed"):
        ENGINE_PRESETS.build("lens", {"budget": 1}, context)


def _without_token_slos(engine: FakeEngine, slack_s: float | None) -> None:
    """Strip the token SLOs; give every request a deadline ``slack_s`` after now (None: no deadline)."""
    for seq in engine.running_seqs + engine.waiting:
        seq.request.ttft_slo_s = seq.request.tpot_slo_s = None
        seq.request.deadline_s = math.inf if slack_s is None else engine.now_s + slack_s


def test_deadline_bounds_are_slack_over_predicted_steps() -> None:
    _, engine = _lens_engine(waiting=2)
    _without_token_slos(engine, 30.0)
    head = engine.waiting[0].request
    assert call_deadline_s(head) == engine.now_s + 30.0
    head.budget_s, head.arrival_s = 10.0, engine.now_s - 4.0  # the call's budget is tighter: 6 s left
    assert call_deadline_s(head) == engine.now_s + 6.0
    assert first_token_bound_s(head, engine.now_s, 0.01) == pytest.approx(6.0 - 250 * 0.01)
    assert first_token_bound_s(head, engine.now_s, 0.1) is None  # cannot make it any more
    # Running requests decoded 10 of 250 predicted tokens: 30 s over 240 steps.
    assert step_bound_s(engine.running_seqs, engine.now_s) == pytest.approx(30.0 / 240)
    engine.running_seqs[0].request.deadline_s = engine.now_s - 1.0  # late requests give no bound
    assert step_bound_s(engine.running_seqs, engine.now_s) == pytest.approx(30.0 / 240)
    assert step_bound_s(engine.running_seqs[:1], engine.now_s) is None


def test_lens_targets_the_deadline_bound_without_token_slos() -> None:
    lens, engine = _lens_engine()
    _without_token_slos(engine, 30.0)
    lens.plan(engine)
    target = lens.last_target
    assert target is not None and target.high_s == pytest.approx(30.0 / 240)
    assert target.td_s > target.low_s  # relaxed: requests wait
    off = LensBatching(model=StructuralStepModel(PARAMS), deadline_bounds=False)
    off.plan(engine)
    assert off.last_target is not None and off.last_target.high_s > target.high_s  # the token cap


def test_lens_relaxes_whenever_requests_wait_unless_told_to_need_a_ttft_slo() -> None:
    lens, engine = _lens_engine()
    _without_token_slos(engine, None)
    lens.plan(engine)
    assert lens.last_target is not None and lens.last_target.branch is Branch.RELAXED
    strict = LensBatching(model=StructuralStepModel(PARAMS), relax="ttft")
    strict.plan(engine)
    assert strict.last_target is not None and strict.last_target.branch is Branch.LOW
    context = PolicyContext((), np.random.default_rng(0), HistoryOutputPredictor())
    with pytest.raises(ConfigError, match="relax"):
        ENGINE_PRESETS.build("lens", {"relax": "never"}, context)
