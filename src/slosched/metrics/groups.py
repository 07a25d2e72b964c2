"""Per-template and per-tenant breakdowns of a run: attainment and latency percentiles per group.

A job meets its SLO here exactly as in ``summarize`` (completed within ``slo_s`` and every call within its
token SLOs), so the groups of one run add up to its summary. Latency percentiles cover completed jobs and
are NaN for a group without any.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from slosched.core.records import JobRecord, RunResult
from slosched.core.request import Outcome
from slosched.metrics.summary import token_slo_missed_jobs

GroupKey = Literal["template", "tenant"]
NO_NAME = "(none)"


@dataclass(frozen=True, slots=True)
class GroupStats:
    """One group of one run; ``attainment`` = ``deadline_met / jobs`` in [0, 1]."""

    group: str
    jobs: int
    completed: int
    deadline_met: int
    p50_latency_s: float
    p99_latency_s: float

    @property
    def attainment(self) -> float:
        return self.deadline_met / self.jobs if self.jobs else math.nan


def _key_of(key: GroupKey) -> Callable[[JobRecord], str]:
    if key == "template":
        return lambda job: job.template or NO_NAME
    if key == "tenant":
        return lambda job: job.tenant or NO_NAME
    raise ValueError(f"group key must be 'template' or 'tenant', got {key!r}")


def group_stats(result: RunResult, key: GroupKey) -> list[GroupStats]:
    """The run's jobs grouped by ``key``, one entry per group in name order."""
    name_of = _key_of(key)
    missed_tokens = token_slo_missed_jobs(result.requests)
    groups: dict[str, list[JobRecord]] = {}
    for job in result.jobs:
        groups.setdefault(name_of(job), []).append(job)
    stats = []
    for name in sorted(groups):
        members = groups[name]
        latencies = np.array([j.finish_s - j.arrival_s for j in members if j.outcome is Outcome.COMPLETED])
        p50, p99 = np.percentile(latencies, [50.0, 99.0]) if latencies.size else (math.nan, math.nan)
        stats.append(
            GroupStats(
                group=name,
                jobs=len(members),
                completed=int(latencies.size),
                deadline_met=sum(1 for j in members if j.deadline_met and j.id not in missed_tokens),
                p50_latency_s=float(p50),
                p99_latency_s=float(p99),
            )
        )
    return stats


def group_names(per_policy: dict[str, list[GroupStats]]) -> list[str]:
    """Every group that occurs in any policy's run, in name order."""
    return sorted({stats.group for groups in per_policy.values() for stats in groups})
