"""relQuery latency breakdown: waiting / core running / tail running."""

from __future__ import annotations

import math

import pytest

from slosched.core.job import JobKind
from slosched.core.records import JobRecord
from slosched.core.request import Outcome
from slosched.metrics.breakdown import breakdown_stats, job_breakdown


def record(
    arrival: float,
    first: float,
    last: float,
    finish: float,
    outcome: Outcome = Outcome.COMPLETED,
    kind: JobKind = JobKind.RELQUERY,
) -> JobRecord:
    return JobRecord(
        "j", kind, "t", arrival, outcome, 3, math.inf, 1.0, finish_s=finish, first_prefill_s=first, last_prefill_s=last
    )


def test_parts_sum_to_the_latency() -> None:
    part = job_breakdown(record(1.0, 3.0, 4.5, 7.0))
    assert part is not None
    assert (part.waiting_s, part.core_s, part.tail_s) == (2.0, 1.5, 2.5)
    assert part.total_s == pytest.approx(record(1.0, 3.0, 4.5, 7.0).latency_s)


def test_means_skip_unfinished_and_other_kinds() -> None:
    records = [
        record(0.0, 1.0, 2.0, 4.0),
        record(0.0, 3.0, 4.0, 6.0),
        record(0.0, 1.0, 1.0, math.nan, Outcome.FAILED),
        record(0.0, 9.0, 9.0, 9.0, kind=JobKind.SINGLE),
    ]
    stats = breakdown_stats(records)
    assert (stats.count, stats.waiting_s, stats.core_s, stats.tail_s) == (2, 2.0, 1.0, 2.0)
    assert breakdown_stats([]).count == 0 and math.isnan(breakdown_stats([]).waiting_s)
    assert breakdown_stats([]).to_json_dict()["waiting_s"] is None
