"""``policies.job.deadline``: every call of a released stage may use all the time the job has left."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import JobView, StageDecision
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.job.base import JOB_POLICIES
from slosched.policies.job.deadline import DeadlineBudget
from slosched.policies.registry import PolicyContext
from tests.conftest import make_instance


def view(deadline_s: float, stage: str = "s2") -> JobView:
    return JobView("j", "workflow", "t", 0.0, deadline_s, deadline_s, stage, ("s1",))


def request(index: int) -> Request:
    return Request(f"r{index}", "j", "s2", "t", 100, 64, 5.0, 0.0)


@given(deadline=st.floats(min_value=0.0, max_value=1e6), now=st.floats(min_value=0.0, max_value=1e6))
def test_budget_is_the_time_left(deadline: float, now: float) -> None:
    requests = [request(i) for i in range(3)]
    DeadlineBudget().decide(view(deadline), requests, now).apply(requests)
    assert [r.budget_s for r in requests] == [deadline - now] * 3
    assert all(r.priority == 0.0 and r.deadline_s == math.inf for r in requests)  # nothing else is touched


def test_no_deadline_means_an_infinite_budget() -> None:
    requests = [request(0)]
    DeadlineBudget().decide(view(math.inf), requests, 10.0).apply(requests)
    assert requests[0].budget_s == math.inf


def test_registered_without_parameters() -> None:
    context = PolicyContext((make_instance(),), np.random.default_rng(0), HistoryOutputPredictor())
    assert isinstance(JOB_POLICIES.build("deadline", {}, context), DeadlineBudget)
    with pytest.raises(ConfigError):
        JOB_POLICIES.build("deadline", {"share": 0.5}, context)


def test_job_policies_decide_without_touching_the_requests() -> None:
    """Every registered job policy returns its decision; the runtime applies it (never the policy)."""
    context = PolicyContext((make_instance(),), np.random.default_rng(0), HistoryOutputPredictor())
    for name in JOB_POLICIES.names():
        policy = JOB_POLICIES.build(name, {}, context)
        requests = [request(i) for i in range(2)]
        before = [dataclasses.astuple(r) for r in requests]
        decision = policy.decide(view(50.0), requests, 10.0)
        assert isinstance(decision, StageDecision), name
        assert [dataclasses.astuple(r) for r in requests] == before, name
