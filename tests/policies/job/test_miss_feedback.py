"""The demand test's learned price (``policies/job/miss_feedback.py``): admitted workflows that run late make
it stricter, on-time ones relax it down to the plain test, and it settles where ``target`` of them are late."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.core.views import JobView
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.job.critical_path import CriticalPathBudget, CriticalPathParams
from slosched.policies.job.miss_feedback import MAX_SCALE, MissFeedback
from tests.policies.job.test_backlog import FakeView, call


def _resolve(feedback: MissFeedback, outcomes: list[bool]) -> None:
    for index, late in enumerate(outcomes):
        feedback.admitted(f"j{index}", 100.0, 0.0)
        feedback.resolved(f"j{index}", late)


@given(outcomes=st.lists(st.booleans(), max_size=200), target=st.sampled_from([0.1, 0.2, 0.5]))
def test_the_scale_stays_within_its_bounds_and_counts_each_job_once(outcomes: list[bool], target: float) -> None:
    feedback = MissFeedback(target)
    _resolve(feedback, outcomes)
    feedback.resolved("j0", True)  # resolved already (or never admitted): nothing changes
    feedback.resolved("stranger", True)
    assert 1.0 <= feedback.scale <= MAX_SCALE
    assert (feedback.late, feedback.on_time) == (sum(outcomes), len(outcomes) - sum(outcomes))


def test_late_workflows_raise_the_price_and_on_time_ones_bring_it_back() -> None:
    feedback = MissFeedback(0.2)
    _resolve(feedback, [True] * 10)
    raised = feedback.scale
    assert raised == pytest.approx(1.1**10)
    _resolve(feedback, [True] + [False] * 4)  # exactly the target's share late: the price holds
    assert feedback.scale == pytest.approx(raised)
    _resolve(feedback, [False] * 200)
    assert feedback.scale == 1.0  # never below the plain test
    fixed = MissFeedback(None)
    _resolve(fixed, [True] * 10)
    assert fixed.scale == 1.0 and fixed.late == 0  # no target: a fixed price


def test_workflows_that_never_resolve_are_forgotten_past_their_deadline() -> None:
    feedback = MissFeedback(0.2)
    for index in range(1000):
        feedback.admitted(f"j{index}", float(index), float(index))  # each due as the next arrives
    assert len(feedback._open) < 200
    feedback.resolved("j999", late=False)
    assert feedback.on_time == 1


def _chess(job_id: str, deadline_s: float, stage: str, finished: tuple[str, ...] = ()) -> JobView:
    return JobView.at_release(job_id, "workflow", "text2sql-chess", 0.0, deadline_s, stage, finished)


def test_the_policy_learns_from_its_admitted_workflows_releases() -> None:
    policy = CriticalPathBudget([LinearStepPredictor()], backlog=True, miss_target=0.2)
    view = FakeView()
    for name in ("late", "on-time"):
        decision = policy.decide_with_backlog(_chess(name, 100.0, "IR1"), [call(0, 300)], 0.0, [view])  # type: ignore[list-item]
        assert not decision.best_effort
    policy.decide_with_backlog(_chess("late", 100.0, "GEN", ("IR1",)), [call(1, 3000)], 120.0, [view])  # type: ignore[list-item]
    assert (policy.feedback.late, policy.feedback.scale) == (1, pytest.approx(1.1))
    policy.decide_with_backlog(_chess("on-time", 100.0, "EVAL", ("IR1", "GEN")), [call(2, 900)], 50.0, [view])  # type: ignore[list-item]
    assert policy.feedback.on_time == 0  # UT3 still expected
    policy.decide_with_backlog(_chess("on-time", 100.0, "UT3", ("IR1", "GEN", "EVAL")), [call(3, 300)], 60.0, [view])  # type: ignore[list-item]
    assert policy.feedback.on_time == 1 and policy.feedback.scale < 1.1


def test_a_bad_miss_target_fails_naming_the_key() -> None:
    for bad in (0.0, 1.0, -0.5):
        with pytest.raises(ConfigError, match=r"critical-path\.miss_target"):
            CriticalPathParams(miss_target=bad)
    assert CriticalPathParams().miss_target == 0.2
