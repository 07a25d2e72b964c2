"""The pace test of job-level admission: admitted stages' realized over predicted time, per template."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import JobView
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.job.critical_path import CriticalPathBudget, CriticalPathParams
from slosched.policies.job.pace import MIN_SAMPLES, StagePace
from tests.conftest import make_instance
from tests.policies.job.test_backlog import FakeView, call


def measured(pace: StagePace, ratios: list[float], template: str = "t", at_s: float = 0.0) -> None:
    """One admitted stage per ratio, released at ``at_s`` with a least time alone of 1 s, its job's next
    stage released ``ratio`` seconds later."""
    for index, ratio in enumerate(ratios):
        pace.released(f"{template}{index}", template, at_s, 1.0, deadline_s=1e9)
        pace.next_released(f"{template}{index}", at_s + ratio)


def test_no_pace_until_enough_stages_were_measured() -> None:
    pace = StagePace()
    measured(pace, [2.0] * (MIN_SAMPLES - 1))
    assert pace.pace("t", 100.0, horizon_s=100.0) is None
    measured(pace, [2.0])
    assert pace.pace("t", 100.0, horizon_s=100.0) == 2.0


@given(ratios=st.lists(st.floats(min_value=0.01, max_value=100.0), min_size=MIN_SAMPLES, max_size=80))
def test_the_pace_is_the_median_of_the_recent_stages(ratios: list[float]) -> None:
    pace = StagePace()
    measured(pace, ratios)
    found = pace.pace("t", 100.0, horizon_s=1e6)
    assert found is not None
    recent = ratios[-64:]
    assert min(recent) <= found <= max(recent)
    assert sum(r <= found for r in recent) >= len(recent) / 2 <= sum(r >= found for r in recent)


def test_stages_older_than_the_horizon_or_of_another_template_do_not_count() -> None:
    pace = StagePace()
    measured(pace, [5.0] * MIN_SAMPLES, at_s=95.0)  # measured at 100
    assert pace.pace("t", 100.0 + 30.0, horizon_s=60.0) == 5.0
    # Measured under a load that has passed: after the horizon the test admits again.
    assert pace.pace("t", 100.0 + 61.0, horizon_s=60.0) is None
    assert pace.pace("other", 100.0, horizon_s=60.0) is None
    # A release without an open stage (a relegated job's, a finished job's) is no sample.
    pace.next_released("never-released", 100.0)
    assert pace.pace("t", 100.0, horizon_s=60.0) == 5.0


def test_open_stages_of_jobs_past_their_deadline_are_forgotten() -> None:
    pace = StagePace()
    for index in range(200):
        pace.released(f"j{index}", "t", float(index), 1.0, deadline_s=float(index) + 10.0)
    assert len(pace._open) < 100  # the ones far past their deadline went at the last pruning


def workflow(
    job_id: str, arrival_s: float, slo_s: float, finished: tuple[str, ...] = (), template: str = "t"
) -> JobView:
    stage = "s2" if finished else "s1"
    return JobView.at_release(job_id, "workflow", template, arrival_s, slo_s, stage, finished)


def rows(index: int) -> list[Request]:
    return [call(index), call(index + 300)]  # two calls at once: a job of one call is judged alone


def slow_pace_policy(
    pace_factor: float | None, ratio: float, kept_slo: float = 0.0, template: str = "t"
) -> tuple[CriticalPathBudget, float]:
    """A policy whose admitted workflows' first stages, all released at 0, took ``ratio`` x their least time
    alone, on an idle instance (neither the per-call nor the demand test binds); returns it and that least
    time. With ``kept_slo`` (x that time), one more workflow "kept" arrives at 0 with that SLO, its next stage
    not released yet; ``template``: the workflows' template."""
    policy = CriticalPathBudget([LinearStepPredictor()], backlog=True, pace_factor=pace_factor)
    idle = [FakeView(spec=make_instance("i"))]
    alone_s = policy.remaining_min_s(workflow("x", 0.0, 1.0, template=template), rows(0))
    slo_s = 1000.0 * alone_s
    for index in range(MIN_SAMPLES):
        first = workflow(f"w{index}", 0.0, slo_s, template=template)
        assert not policy.decide_with_backlog(first, rows(0), 0.0, idle).best_effort  # type: ignore[arg-type]
    if kept_slo:
        kept = workflow("kept", 0.0, kept_slo * alone_s, template=template)
        assert not policy.decide_with_backlog(kept, rows(0), 0.0, idle).best_effort  # type: ignore[arg-type]
    for index in range(MIN_SAMPLES):
        later = workflow(f"w{index}", 0.0, slo_s, ("s1",), template)
        assert not policy.decide_with_backlog(later, [call(1)], ratio * alone_s, idle).best_effort  # type: ignore[arg-type]
    return policy, alone_s


def test_a_workflow_that_would_miss_at_the_admitted_pace_is_relegated_at_arrival() -> None:
    idle = [FakeView(spec=make_instance("i"))]
    for pace_factor, ratio, relegated in ((1.0, 10.0, True), (None, 10.0, False), (1.0, 1.5, False)):
        policy, alone_s = slow_pace_policy(pace_factor, ratio)
        now_s = ratio * alone_s
        new = workflow("new", now_s, 3.0 * alone_s)  # fits alone three times over
        decision = policy.decide_with_backlog(new, rows(7), now_s, idle)  # type: ignore[arg-type]
        assert decision.best_effort is relegated, (pace_factor, ratio)
        if relegated:  # ... and stays relegated at its later stages, as any job relegated at arrival
            later = workflow("new", now_s, 3.0 * alone_s, ("s1",))
            assert policy.decide_with_backlog(later, [call(8)], now_s, idle).best_effort  # type: ignore[arg-type]


def test_an_admitted_workflow_is_never_relegated_by_the_pace_at_a_later_stage() -> None:
    # "kept" has 3x its next stage's least time left when it is released: at the pace of 10 a new job
    # would be relegated; an admitted one is judged alone.
    policy, alone_s = slow_pace_policy(1.0, 10.0, kept_slo=13.0)
    idle = [FakeView(spec=make_instance("i"))]
    later = workflow("kept", 0.0, 13.0 * alone_s, ("s1",))
    assert not policy.decide_with_backlog(later, [call(4)], 10.0 * alone_s, idle).best_effort  # type: ignore[arg-type]


def test_a_pace_factor_must_be_positive_or_none() -> None:
    with pytest.raises(ConfigError, match=r"critical-path\.pace_factor"):
        CriticalPathParams(pace_factor=0.0)
    assert CriticalPathParams(pace_factor=None).pace_factor is None
