"""Batching ``deadline-budget``'s ``yield_to_queue`` (on by default): running calls with only a deadline stop
sizing the steps while steps at the ceiling would start every waiting call that can still count in time, and
size them again once the queue outgrows that (the step bound itself is tested with the stack, tests/policies/stacks)."""

from __future__ import annotations

import math
from dataclasses import replace

from slosched.core.request import Request
from slosched.policies.engine.batching.deadline_budget import DeadlineBudgetBatching, queue_keeps_up
from tests.policies.engine.deadline_fakes import FakeEngine, FakeSeq


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
