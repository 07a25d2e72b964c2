"""Job policy ``static-sum`` (vLLM-SP): every request of a job gets the job's summed estimate."""

from __future__ import annotations

import math

import pytest

from slosched.core.request import Request
from slosched.core.views import JobView
from slosched.policies.job.static_sum import StaticSumPriority


def requests(job: str, count: int) -> list[Request]:
    return [
        Request(f"{job}/{i}", job, "rows", "t", 200 + 10 * i, 10, 0.0, 0.0, predicted_output_tokens=5.0)
        for i in range(count)
    ]


def view(job: str) -> JobView:
    return JobView(job, "relquery", "t", 0.0, 30.0, 30.0, "rows", ())


def test_every_row_gets_the_fixed_sum_and_bigger_jobs_rank_later() -> None:
    policy = StaticSumPriority()
    small, large = requests("s", 2), requests("l", 6)
    policy.decide(view("s"), small, 0.0).apply(small)
    policy.decide(view("l"), large, 4.0).apply(large)
    expected = sum(policy.request_estimate_s(r) for r in small)
    assert all(r.priority == pytest.approx(expected) for r in small)
    assert len({r.priority for r in large}) == 1 and large[0].priority > small[0].priority > 0
    assert large[0].budget_s == pytest.approx(26.0) and not math.isinf(small[0].budget_s or math.inf)
