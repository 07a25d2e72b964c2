"""Batching ``deadline-budget``'s ``yield_to_queue`` (on by default): running calls with only a deadline stop
sizing the steps while steps at the ceiling would start every waiting call that can still count in time, and
size them again once the queue outgrows that (the step bound itself is tested with the stack, tests/policies/stacks;
here, that its inlined loop keeps the rule the shared deadline helpers state)."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import example, given, settings
from hypothesis import strategies as st

from slosched.core.request import Request
from slosched.policies.engine.batching.deadline_budget import (
    STAGE_SHARE_TOLERANCE_S,
    DeadlineBudgetBatching,
    queue_keeps_up,
    tightest_step_s,
)
from slosched.policies.engine.batching.lens_deadline import call_deadline_s, remaining_steps
from tests.policies.engine.deadline_fakes import FakeEngine, FakeSeq
from tests.policies.engine.deadline_fakes import call as deadline_call


def call(name: str, deadline_s: float = math.inf, prompt: int = 500, predicted: float = 100.0) -> Request:
    return Request(
        name, f"job-{name}", "s", "t", prompt, 256, 0.0, 0.0, deadline_s=deadline_s, predicted_output_tokens=predicted
    )


def tight_runner() -> FakeSeq:
    """A running call that needs short steps: 300 tokens left in 6 s of slack (20 ms a step)."""
    return FakeSeq(call("runner", deadline_s=6.0, predicted=301.0), num_output_tokens=1)


def test_a_short_queue_that_keeps_up_at_the_ceiling_lifts_the_deadline_bound() -> None:
    engine = FakeEngine(now_s=0.0, running=[tight_runner()], waiting=[FakeSeq(call("w", deadline_s=30.0))])
    assert queue_keeps_up(engine, 2048)
    bounded = DeadlineBudgetBatching(2048, 64, 0.8, yield_to_queue=False)
    yielding = DeadlineBudgetBatching(2048, 64, 0.8, yield_to_queue=True)
    assert bounded.plan(engine).token_budget < 2048
    assert yielding.plan(engine).token_budget == 2048


def test_a_queue_the_ceiling_cannot_clear_in_time_keeps_the_bound() -> None:
    queue = [FakeSeq(call(f"w{i}", deadline_s=2.0, prompt=2000)) for i in range(40)]  # 80k tokens due in 2 s
    engine = FakeEngine(now_s=0.0, running=[tight_runner()], waiting=queue)
    assert not queue_keeps_up(engine, 2048)
    bounded = DeadlineBudgetBatching(2048, 64, 0.8, yield_to_queue=False)
    yielding = DeadlineBudgetBatching(2048, 64, 0.8, yield_to_queue=True)
    assert yielding.plan(engine).token_budget == bounded.plan(engine).token_budget < 2048


def test_only_calls_that_can_still_count_are_yielded_to() -> None:
    late = FakeSeq(call("late", deadline_s=0.5))
    relegated = FakeSeq(replace(call("relegated", deadline_s=30.0), best_effort=True))
    no_deadline = FakeSeq(call("free"))
    engine = FakeEngine(now_s=1.0, running=[tight_runner()], waiting=[late, relegated, no_deadline])
    assert not queue_keeps_up(engine, 2048)  # nobody waiting to yield to
    engine.waiting.append(FakeSeq(call("ok", deadline_s=30.0)))
    assert queue_keeps_up(engine, 2048)


def test_a_tpot_slo_bounds_the_step_even_while_yielding() -> None:
    tpot_runner = FakeSeq(replace(call("tpot"), tpot_slo_s=0.02))
    engine = FakeEngine(now_s=0.0, running=[tpot_runner], waiting=[FakeSeq(call("w", deadline_s=30.0))])
    yielding = DeadlineBudgetBatching(2048, 64, 0.8, yield_to_queue=True)
    assert yielding.plan(engine).token_budget < 2048


def test_a_workflow_stage_on_a_share_of_its_job_deadline_bounds_the_step_even_while_yielding() -> None:
    """A stage whose budget ends before its job's deadline delays every later stage by its own latency: it
    keeps sizing the steps; the job's final call (budget up to the deadline) yields like a one-call job."""
    waiting = [FakeSeq(call("w", deadline_s=30.0))]
    stage = FakeSeq(replace(call("stage", deadline_s=60.0, predicted=301.0), budget_s=6.0), num_output_tokens=1)
    final = FakeSeq(replace(call("final", deadline_s=6.0, predicted=301.0), budget_s=6.0), num_output_tokens=1)
    yielding = DeadlineBudgetBatching(2048, 64, 0.8, yield_to_queue=True)
    assert yielding.plan(FakeEngine(now_s=0.0, running=[stage], waiting=waiting)).token_budget < 2048
    assert yielding.plan(FakeEngine(now_s=0.0, running=[final], waiting=waiting)).token_budget == 2048


def tightest_step_reference(running: list[FakeSeq], now_s: float, floor_s: float, final_floor_s: float | None) -> float:
    """``tightest_step_s`` as its docstring states it, written with the shared deadline helpers (the product
    inlines them: it is the stack's hottest loop)."""
    bounds = []
    for seq in running:
        request = seq.request
        if request.tpot_slo_s is not None:
            bounds.append(request.tpot_slo_s)
            continue
        deadline = call_deadline_s(request)
        if request.best_effort or not 0.0 < deadline - now_s < math.inf:
            continue
        needed = (deadline - now_s) / remaining_steps(request, seq.num_output_tokens)
        on_job_deadline = deadline >= request.deadline_s - STAGE_SHARE_TOLERANCE_S
        floor = final_floor_s if final_floor_s is not None and on_job_deadline else floor_s
        if needed >= floor:
            bounds.append(needed)
    return min(bounds, default=math.inf)


def some(values: list[float], low: float, high: float) -> st.SearchStrategy[float]:
    """Mostly a few round values (ties between a call's two deadlines and with the floor, steps left near 1),
    else any float in range."""
    return st.one_of(st.sampled_from(values), st.sampled_from(values), st.sampled_from(values), st.floats(low, high))


def running_seq(
    i: int,
    deadline: float,
    budget: float | None,
    arrival: float,
    predicted: float,
    tpot: float | None,
    relegated: bool,
    done: int,
) -> FakeSeq:
    request = deadline_call(f"c{i}", deadline, budget, arrival, predicted=predicted, tpot=tpot)
    return FakeSeq(replace(request, best_effort=relegated), num_output_tokens=done)


running_call = st.builds(
    running_seq,
    st.integers(0, 99),
    st.one_of(st.just(math.inf), some([2.0, 5.0, 8.0], 0.0, 30.0)),
    st.one_of(st.none(), some([1.0, 1.75, 3.0, 4.75, 5.0], 0.0, 20.0)),
    some([0.0, 3.0], 0.0, 10.0),
    some([1.0, 1.25, 2.0, 50.0, 51.5], 1.0, 400.0),
    st.one_of(st.none(), some([0.02, 0.05], 0.001, 0.2)),
    st.booleans(),
    st.sampled_from([0, 1, 49, 50, 300]),
)


def edge(deadline_s: float, budget_s: float | None = None, predicted: float = 50.0, done: int = 0) -> list[FakeSeq]:
    """One running call beside a looser one, so that the call decides the bound."""
    tight = FakeSeq(deadline_call("edge", deadline_s, budget_s, predicted=predicted), num_output_tokens=done)
    return [tight, FakeSeq(deadline_call("loose", 30.0, predicted=2.0))]


@settings(max_examples=500, deadline=None)
@example(running=edge(5.0, predicted=1.25), now_s=0.0, floor_s=0.0, final_floor_s=None)  # 1.25 steps left
@example(running=edge(5.0, budget_s=4.75), now_s=0.0, floor_s=0.0, final_floor_s=None)  # budget just inside
@example(running=edge(5.0), now_s=0.0, floor_s=0.1, final_floor_s=None)  # needs exactly the floor
@example(running=edge(5.0, budget_s=4.75), now_s=0.0, floor_s=0.0, final_floor_s=math.inf)  # a stage's share
@given(
    running=st.lists(running_call, max_size=5),
    now_s=some([0.0, 0.5, 2.0], 0.0, 20.0),
    floor_s=some([0.0, 0.01, 0.1], 0.0, 0.5),
    final_floor_s=st.one_of(st.none(), st.just(math.inf), some([0.0, 0.02], 0.0, 0.5)),
)
def test_the_inlined_step_bound_is_the_stated_rule(
    running: list[FakeSeq], now_s: float, floor_s: float, final_floor_s: float | None
) -> None:
    assert tightest_step_s(running, now_s, floor_s, final_floor_s) == tightest_step_reference(
        running, now_s, floor_s, final_floor_s
    )
