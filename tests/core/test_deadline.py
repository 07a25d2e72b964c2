"""The one deadline rule, the one ``JobView`` constructor and the job policies' decisions."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from slosched.core.deadline import absolute_deadline_s, slo_or_inf
from slosched.core.request import Request
from slosched.core.views import JobView, StageDecision

times = st.floats(min_value=0.0, max_value=1e9, allow_nan=False)


@given(arrival=times, slo=st.floats(min_value=1e-6, max_value=1e6))
def test_a_deadline_is_arrival_plus_slo_on_the_same_clock(arrival: float, slo: float) -> None:
    assert absolute_deadline_s(arrival, slo) == arrival + slo


@given(arrival=times)
def test_no_slo_means_no_deadline(arrival: float) -> None:
    assert absolute_deadline_s(arrival, None) == math.inf
    assert absolute_deadline_s(arrival, math.inf) == math.inf
    assert slo_or_inf(None) == math.inf and slo_or_inf(3.0) == 3.0


def test_job_view_at_release_follows_the_rule() -> None:
    view = JobView.at_release("j", "workflow", "t", 10.0, 5.0, "B", ["A"])
    assert (view.slo_s, view.deadline_s, view.finished_stages) == (5.0, 15.0, ("A",))
    open_ended = JobView.at_release("j", "single", "t", 10.0, None, "s", [])
    assert (open_ended.slo_s, open_ended.deadline_s) == (math.inf, math.inf)


def _request(index: int) -> Request:
    return Request(f"r{index}", "j", "s", "t", 10, 5, 0.0, 0.0)


def test_a_decision_is_written_only_where_it_decides_something() -> None:
    requests = [_request(0), _request(1)]
    requests[1].priority = 7.0
    StageDecision().apply(requests)
    assert [(r.budget_s, r.priority, r.best_effort) for r in requests] == [(None, 0.0, False), (None, 7.0, False)]
    StageDecision(budget_s=2.0, priority=1.5, best_effort=True).apply(requests)
    assert all((r.budget_s, r.priority, r.best_effort) == (2.0, 1.5, True) for r in requests)
