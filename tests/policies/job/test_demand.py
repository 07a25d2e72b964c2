"""EDF's demand test in job-level admission (``policies/job/demand.py``, ``critical-path``'s ``backlog``):
admitted jobs' stages not released yet are booked and get in the way of later-due jobs only; relegated and
later-due work does not; more work ahead never makes a job look more feasible."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from slosched.core.views import JobView
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.job.critical_path import CriticalPathBudget
from slosched.policies.job.demand import (
    CommittedWork,
    RelegatedJobs,
    Work,
    calls_work,
    decode_tokens_per_s,
    demand_s,
    queued_work,
    uncached_share,
)
from tests.policies.job.test_backlog import FakeView, call

PEAK = 10_000.0  # prompt tokens per second, one instance


def chess(job_id: str, deadline_s: float, stage: str = "IR1") -> JobView:
    return JobView.at_release(job_id, "workflow", "text2sql-chess", 0.0, deadline_s, stage, ())


def test_committed_work_counts_only_other_jobs_due_no_later() -> None:
    ledger = CommittedWork()
    ledger.record("early", 10.0, Work(1000, 100))
    ledger.record("late", 50.0, Work(7000, 700))
    assert ledger.ahead_of("me", 20.0, 0.0) == Work(1000, 100)
    assert ledger.ahead_of("early", 60.0, 0.0) == Work(7000, 700)  # never its own booking
    assert ledger.ahead_of("me", 60.0, 0.0) == Work(8000, 800)
    ledger.forget("late")
    assert ledger.ahead_of("me", 60.0, 0.0) == Work(1000, 100)


def test_bookings_end_with_the_last_stage_and_past_the_deadline() -> None:
    ledger = CommittedWork()
    ledger.record("a", 10.0, Work(1000, 100))
    ledger.record("b", 30.0, Work(2000, 100))
    ledger.record("a", 10.0, Work())  # its last stage released: nothing more expected
    ledger.record("c", math.inf, Work(5000, 10))  # no deadline: in nobody's way by EDF
    assert len(ledger) == 1
    assert ledger.ahead_of("me", 100.0, 31.0) == Work()  # b is past its deadline: dropped
    assert len(ledger) == 0


def test_relegated_and_later_due_waiting_calls_are_not_ahead() -> None:
    view = FakeView([call(0, 4000, deadline_s=5.0), call(1, 3000, best_effort=True), call(2, 2000, deadline_s=90.0)])
    work = queued_work([view], 10.0)  # type: ignore[list-item]
    assert work.prompt_tokens == 4000
    assert work.output_tokens == 50.0  # only call 0's predicted output


def test_prompt_tokens_a_prefix_cache_holds_are_not_work() -> None:
    """A waiting call's cached prefix on its own instance is not prefill ahead; a released call's counts the
    most any instance holds; the share left uncached carries to the job's later stages."""
    waiting, released = call(0, 4000, deadline_s=5.0), call(1, 1000)
    holder = FakeView([waiting], cached={"r0": 3000, "r1": 200})
    other = FakeView(cached={"r0": 4000, "r1": 800})  # holds more of r0, but r0 does not wait there
    assert queued_work([holder, other], 10.0).prompt_tokens == 1000  # type: ignore[list-item]
    own = calls_work([released], [holder, other])  # type: ignore[list-item]
    assert own == Work(200, 50.0)
    assert uncached_share([released], own) == 0.2
    assert Work(5000, 70).with_prompt_share(0.2) == Work(1000, 70)
    assert calls_work([released]) == Work(1000, 50.0)  # no instances: nothing known cached


def test_a_cached_context_keeps_a_workflow_the_uncached_one_would_lose() -> None:
    """The same earlier-due bookings and the same new CHESS job: relegated when its prompts must all be
    computed, kept when the instance holds most of its prefix (and its later stages' share with it)."""

    def judged(cached: dict[str, int]) -> bool:
        policy = CriticalPathBudget([LinearStepPredictor()], backlog=True)
        view = FakeView(cached=cached)
        deadline = 3.0 * policy.remaining_min_s(chess("j0", 1e9), [call(0, 3000)])
        for index in range(40):
            policy.decide_with_backlog(chess(f"j{index}", deadline), [call(index, 3000)], 0.0, [view])  # type: ignore[list-item]
        return policy.decide_with_backlog(chess("late", deadline + 1.0), [call(999, 3000)], 0.0, [view]).best_effort  # type: ignore[list-item]

    assert judged({})
    assert not judged({f"r{index}": 2900 for index in [*range(12), 999]})


@given(
    prompts=st.lists(st.integers(min_value=0, max_value=50_000), min_size=2, max_size=2),
    outputs=st.lists(st.integers(min_value=0, max_value=5_000), min_size=2, max_size=2),
)
def test_demand_grows_with_work(prompts: list[int], outputs: list[int]) -> None:
    views = [FakeView()]
    small = Work(min(prompts), min(outputs))
    large = Work(max(prompts), max(outputs))
    assert 0.0 <= demand_s(small, views, [PEAK]) <= demand_s(large, views, [PEAK])  # type: ignore[arg-type]
    # A second instance never makes the same work take longer.
    two = [FakeView(), FakeView()]
    assert demand_s(large, two, [PEAK, PEAK]) <= demand_s(large, views, [PEAK])  # type: ignore[arg-type]


def test_decode_rate_uses_the_batch_the_kv_cache_holds() -> None:
    roomy, tight = FakeView(num_kv_blocks=100_000), FakeView(num_kv_blocks=64)
    assert decode_tokens_per_s(roomy) > decode_tokens_per_s(tight) > 0  # type: ignore[arg-type]


def test_jobs_admitted_earlier_make_a_later_one_hopeless_before_anything_is_queued() -> None:
    """Two CHESS jobs find an idle cluster; the per-call test keeps both. With many earlier-due jobs
    booked, a later one does not fit behind their unreleased stages and is relegated at once."""
    policy = CriticalPathBudget([LinearStepPredictor()], backlog=True)
    idle = [FakeView()]
    first = [call(0, 300)]
    alone_s = policy.remaining_min_s(chess("j0", 1e9), first)
    deadline = 3.0 * alone_s
    assert not policy.decide_with_backlog(chess("j0", deadline), first, 0.0, idle).best_effort  # type: ignore[arg-type]
    assert len(policy.committed) == 1
    for index in range(1, 200):
        policy.decide_with_backlog(chess(f"j{index}", deadline), [call(index, 300)], 0.0, idle)  # type: ignore[arg-type]
    later = chess("late", deadline + 1.0)
    assert policy.decide_with_backlog(later, [call(999, 300)], 0.0, idle).best_effort  # type: ignore[arg-type]
    # Due before all of them, the same job is kept: their work is not in its way.
    early = chess("early", deadline - 1e-3)
    assert not policy.decide_with_backlog(early, [call(998, 300)], 0.0, idle).best_effort  # type: ignore[arg-type]


@given(deadlines=st.lists(st.floats(min_value=0.0, max_value=100.0), min_size=1, max_size=400), now=st.floats(0, 100))
def test_relegated_jobs_forget_only_what_is_past_its_deadline(deadlines: list[float], now: float) -> None:
    """Every job added stays known while its deadline is ahead; the set stays bounded by the ones still due."""
    memory = RelegatedJobs()
    for index, due in enumerate(deadlines):
        memory.add(f"j{index}", due, now)
    for index, due in enumerate(deadlines):
        if due >= now:
            assert f"j{index}" in memory
    assert len(memory) <= 2 * sum(due >= now for due in deadlines) + 65
