"""relQuery latency breakdown: waiting, core running and tail running (RelServe's decomposition).

For a completed job: ``waiting = first prefill - arrival``, ``core = last prefill start - first
prefill``, ``tail = finish - last prefill start`` (a request's prefill start is when it was first
scheduled). The three parts sum to the job's latency. Jobs that did not complete, or never reached a
prefill, are left out; means over no jobs are NaN.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from slosched.core.job import JobKind
from slosched.core.records import JobRecord, RunResult
from slosched.core.request import Outcome


@dataclass(frozen=True, slots=True)
class JobBreakdown:
    waiting_s: float
    core_s: float
    tail_s: float

    @property
    def total_s(self) -> float:
        return self.waiting_s + self.core_s + self.tail_s


@dataclass(frozen=True, slots=True)
class BreakdownStats:
    """Means over ``count`` completed jobs, in seconds."""

    count: int
    waiting_s: float
    core_s: float
    tail_s: float

    @property
    def latency_s(self) -> float:
        return self.waiting_s + self.core_s + self.tail_s

    def to_json_dict(self) -> dict[str, float | int | None]:
        def safe(value: float) -> float | None:
            return value if math.isfinite(value) else None

        return {
            "count": self.count,
            "waiting_s": safe(self.waiting_s),
            "core_s": safe(self.core_s),
            "tail_s": safe(self.tail_s),
        }


def job_breakdown(record: JobRecord) -> JobBreakdown | None:
    """The breakdown of one completed job, or None when it did not complete or never prefilled."""
    if record.outcome is not Outcome.COMPLETED or not math.isfinite(record.first_prefill_s):
        return None
    return JobBreakdown(
        waiting_s=record.first_prefill_s - record.arrival_s,
        core_s=record.last_prefill_s - record.first_prefill_s,
        tail_s=record.finish_s - record.last_prefill_s,
    )


def breakdown_stats(records: Iterable[JobRecord], kind: JobKind | None = JobKind.RELQUERY) -> BreakdownStats:
    """Mean breakdown over the completed jobs of ``kind`` (None: every kind)."""
    parts = [
        part
        for record in records
        if kind is None or record.kind is kind
        for part in (job_breakdown(record),)
        if part is not None
    ]
    if not parts:
        return BreakdownStats(0, math.nan, math.nan, math.nan)
    count = len(parts)
    return BreakdownStats(
        count=count,
        waiting_s=sum(part.waiting_s for part in parts) / count,
        core_s=sum(part.core_s for part in parts) / count,
        tail_s=sum(part.tail_s for part in parts) / count,
    )


def relquery_breakdown(result: RunResult) -> BreakdownStats:
    return breakdown_stats(result.jobs, JobKind.RELQUERY)
