"""Admission feedback: the pace test's factor scaled by what became of the workflows it admitted."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.core.views import JobView
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.job.admission_feedback import (
    GAIN,
    MAX_SCALE,
    MIN_ARRIVALS,
    MIN_OUTCOMES,
    OVERLOAD_SHARE,
    RECENT_ARRIVALS,
    RECENT_OUTCOMES,
    AdmissionFeedback,
)
from slosched.policies.job.critical_path import CriticalPathBudget, CriticalPathParams
from tests.conftest import make_instance
from tests.policies.job.test_backlog import FakeView, call
from tests.policies.job.test_pace import rows, slow_pace_policy, workflow

CHESS = "text2sql-chess"


def outcomes(feedback: AdmissionFeedback, failure_share: float, count: int, at_s: float = 0.0) -> None:
    """``count`` admitted workflows' outcomes at ``at_s``, failures spread evenly at ``failure_share`` of them."""
    owed = 0.0
    start = feedback.failures + feedback.successes
    for index in range(start, start + count):
        feedback.admitted(f"j{index}", deadline_s=at_s + 10.0, slo_s=10.0, now_s=at_s)
        owed += failure_share
        if owed >= 1.0 - 1e-9:
            owed -= 1.0
            feedback.failed(f"j{index}", at_s)
        else:
            feedback.succeeded(f"j{index}", at_s)


def arrivals(
    feedback: AdmissionFeedback, relegated_share: float, count: int = RECENT_ARRIVALS, at_s: float = 0.0
) -> None:
    """``count`` new workflows arriving at ``at_s``, ``relegated_share`` of them relegated by the fixed tests."""
    owed = 0.0
    for _ in range(count):
        owed += relegated_share
        feedback.arrived(at_s, owed >= 1.0 - 1e-9)
        owed -= 1.0 if owed >= 1.0 - 1e-9 else 0.0


@given(
    target=st.floats(min_value=0.05, max_value=0.5),
    share=st.floats(min_value=0.0, max_value=1.0),
    count=st.integers(min_value=0, max_value=200),
)
def test_the_scale_is_one_up_to_the_target_and_grows_with_the_recent_share_above_it(
    target: float, share: float, count: int
) -> None:
    feedback = AdmissionFeedback(target)
    arrivals(feedback, 1.0)
    outcomes(feedback, share, count)
    scale = feedback.scale(0.0, horizon_s=100.0)
    assert 1.0 <= scale <= MAX_SCALE
    recent = min(count, RECENT_OUTCOMES)
    if recent < MIN_OUTCOMES:
        assert scale == 1.0
        return
    failed = sum(failed for _, failed in feedback._recent)
    excess = failed / recent - target
    assert scale == (pytest.approx(min(math.exp(GAIN * excess), MAX_SCALE)) if excess > 0 else 1.0)
    more = AdmissionFeedback(target)
    arrivals(more, 1.0)
    outcomes(more, min(share + 0.2, 1.0), count)
    assert more.scale(0.0, horizon_s=100.0) >= scale  # more failures never loosen it


@given(relegated_share=st.floats(min_value=0.0, max_value=1.0), count=st.integers(min_value=0, max_value=150))
def test_failures_scale_the_factor_only_while_the_fixed_tests_relegate_a_share_of_the_arrivals(
    relegated_share: float, count: int
) -> None:
    """Near capacity the fixed tests relegate almost nothing, and the failure share over a few dozen outcomes is
    too noisy to act on alone: the scale stays 1 there, whatever the failures."""
    feedback = AdmissionFeedback(0.2)
    outcomes(feedback, 1.0, RECENT_OUTCOMES)
    arrivals(feedback, relegated_share, count)
    recent = list(feedback._arrivals)
    overloaded = len(recent) >= MIN_ARRIVALS and sum(r for _, r in recent) >= OVERLOAD_SHARE * len(recent)
    assert feedback.overloaded(0.0, horizon_s=100.0) is overloaded
    assert feedback.scale(0.0, horizon_s=100.0) == (MAX_SCALE if overloaded else 1.0)


def test_a_burst_of_failures_stops_counting_once_it_is_older_than_the_horizon() -> None:
    feedback = AdmissionFeedback(0.2)
    outcomes(feedback, 1.0, RECENT_OUTCOMES, at_s=0.0)
    arrivals(feedback, 1.0, at_s=0.0)
    assert feedback.scale(10.0, horizon_s=30.0) == MAX_SCALE
    arrivals(feedback, 1.0, at_s=31.0)  # still overloaded, but the failures aged out
    assert feedback.scale(31.0, horizon_s=30.0) == 1.0  # the congestion passed: the fixed factor again
    outcomes(feedback, 0.0, RECENT_OUTCOMES, at_s=40.0)
    assert feedback.scale(41.0, horizon_s=100.0) == 1.0  # newer successes displace the burst


def test_each_admitted_workflow_counts_once_and_only_admitted_ones_count() -> None:
    feedback = AdmissionFeedback(0.2)
    feedback.admitted("a", deadline_s=10.0, slo_s=10.0, now_s=0.0)
    for _ in range(3):  # demoted again at each later release
        feedback.failed("a", 1.0)
    feedback.succeeded("a", 1.0)
    feedback.failed("never-admitted", 1.0)
    feedback.succeeded("never-admitted", 1.0)
    assert (feedback.failures, feedback.successes) == (1, 0)


def test_open_outcomes_are_forgotten_a_slo_past_their_deadline() -> None:
    feedback = AdmissionFeedback(0.2)
    for index in range(300):
        feedback.admitted(f"j{index}", deadline_s=float(index), slo_s=1.0, now_s=float(index))
    assert len(feedback._open) < 150  # the ones long past their deadline went at the last pruning
    feedback.failed("j299", 300.0)
    assert feedback.failures == 1


def test_a_target_must_be_a_share() -> None:
    for bad in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ConfigError, match=r"critical-path\.admission_target"):
            CriticalPathParams(admission_target=bad)
    assert CriticalPathParams(admission_target=None).admission_target is None


def chess(job_id: str, slo_s: float, stage: str, finished: tuple[str, ...]) -> JobView:
    return JobView.at_release(job_id, "workflow", CHESS, 0.0, slo_s, stage, finished)


def test_a_workflow_demoted_mid_way_counts_one_failure_and_one_reaching_its_last_stage_a_success() -> None:
    policy = CriticalPathBudget([LinearStepPredictor()], backlog=True, pace_factor=0.9, admission_target=0.2)
    assert policy.feedback is not None
    idle = [FakeView(spec=make_instance("i"))]
    assert not policy.decide_with_backlog(chess("late", 100.0, "IR1", ()), rows(0), 0.0, idle).best_effort  # type: ignore[arg-type]
    # Past its deadline at two later releases: demoted at both, one failure.
    for stage, finished in (("KW", ("IR1",)), ("IR2", ("IR1", "KW"))):
        assert policy.decide_with_backlog(chess("late", 100.0, stage, finished), [call(1)], 500.0, idle).best_effort  # type: ignore[arg-type]
    assert (policy.feedback.failures, policy.feedback.successes) == (1, 0)
    # A workflow whose last stage (UT3: nothing expected after it) is released in time: one success.
    assert not policy.decide_with_backlog(chess("ok", 1e6, "IR1", ()), rows(0), 0.0, idle).best_effort  # type: ignore[arg-type]
    done = ("IR1", "KW", "IR2", "IR3", "IR4", "GEN", "REVISE1", "UT1", "GUT", "UT2", "EVAL")
    assert not policy.decide_with_backlog(chess("ok", 1e6, "UT3", done), [call(2)], 10.0, idle).best_effort  # type: ignore[arg-type]
    assert (policy.feedback.failures, policy.feedback.successes) == (1, 1)
    # Workflows of unknown templates say nothing of the admission.
    assert not policy.decide_with_backlog(workflow("other", 0.0, 1e6, ("s1",)), [call(3)], 1.0, idle).best_effort  # type: ignore[arg-type]
    assert (policy.feedback.failures, policy.feedback.successes) == (1, 1)


def test_a_tightened_scale_relegates_what_the_fixed_factor_admits() -> None:
    idle = [FakeView(spec=make_instance("i"))]
    # The admitted stages took 1.5x their least time alone: at factor 1 a workflow with 3x its least time
    # left is admitted; after a run of failures (the scale at its cap, 4: 6 > 3) it is relegated, but only
    # while the fixed tests relegate a share of the arrivals (overload).
    for failure_share, overload_share, relegated in ((0.0, 1.0, False), (1.0, 1.0, True), (1.0, 0.0, False)):
        policy, alone_s = slow_pace_policy(1.0, 1.5, template=CHESS)  # the feedback follows known templates
        policy.feedback = AdmissionFeedback(0.2)
        now_s = 1.5 * alone_s
        outcomes(policy.feedback, failure_share, RECENT_OUTCOMES, at_s=now_s)
        arrivals(policy.feedback, overload_share, at_s=now_s)
        new = workflow("new", now_s, 3.0 * alone_s, template=CHESS)
        assert policy.decide_with_backlog(new, rows(7), now_s, idle).best_effort is relegated  # type: ignore[arg-type]
        # The feedback hears the fixed tests' verdict (admitted), not the scaled one: its own relegations must not
        # hold the overload signal up.
        assert policy.feedback._arrivals[-1] == (now_s, False)


def test_feedback_by_default_and_none_turns_it_off() -> None:
    assert CriticalPathParams().admission_target == 0.2  # docs/stack.md: what it costs and gives
    default = CriticalPathBudget([LinearStepPredictor()]).feedback
    assert default is not None and default.target == 0.2
    assert CriticalPathBudget([LinearStepPredictor()], admission_target=None).feedback is None
    assert CriticalPathBudget([LinearStepPredictor()], pace_factor=None, admission_target=0.2).feedback is None
