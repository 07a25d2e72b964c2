"""Small factories for hand-built run results (the simulator's output is the metrics' input)."""

from __future__ import annotations

import math

from slosched.core.job import JobKind
from slosched.core.records import InstanceStats, JobRecord, RequestRecord, RunResult
from slosched.core.request import Outcome


def job(
    job_id: str = "j",
    *,
    arrival_s: float = 0.0,
    latency_s: float | None = 1.0,
    slo_s: float = 10.0,
    no_contention_s: float = 1.0,
    outcome: Outcome = Outcome.COMPLETED,
    template: str = "t",
    tenant: str = "default",
) -> JobRecord:
    """A job record; ``latency_s`` None leaves it unfinished (``finish_s`` NaN)."""
    finish = math.nan if latency_s is None else arrival_s + latency_s
    return JobRecord(
        id=job_id,
        kind=JobKind.SINGLE,
        template=template,
        arrival_s=arrival_s,
        outcome=outcome,
        num_requests=1,
        slo_s=slo_s,
        no_contention_s=no_contention_s,
        finish_s=finish,
        tenant=tenant,
    )


def rejected(job_id: str = "r", arrival_s: float = 0.0) -> JobRecord:
    return job(job_id, arrival_s=arrival_s, latency_s=None, outcome=Outcome.REJECTED)


def request(
    request_id: str = "q",
    *,
    arrival_s: float = 0.0,
    queueing_s: float = 0.0,
    ttft_s: float = 0.1,
    output_tokens: int = 11,
    tpot_s: float = 0.01,
    outcome: Outcome = Outcome.COMPLETED,
) -> RequestRecord:
    """A request whose derived metrics equal the given ones exactly (up to float addition)."""
    first_token = arrival_s + ttft_s
    return RequestRecord(
        id=request_id,
        job_id=request_id,
        stage="s",
        instance="i0",
        arrival_s=arrival_s,
        prompt_tokens=100,
        output_tokens=output_tokens,
        outcome=outcome,
        first_scheduled_s=arrival_s + queueing_s,
        first_token_s=first_token,
        finish_s=first_token + tpot_s * max(output_tokens - 1, 0),
    )


def run(
    jobs: list[JobRecord] | None = None,
    requests: list[RequestRecord] | None = None,
    instances: list[InstanceStats] | None = None,
    policy: str = "p",
    end_s: float = 100.0,
) -> RunResult:
    return RunResult(
        policy=policy,
        seed=0,
        end_s=end_s,
        requests=requests or [],
        jobs=jobs or [],
        instances=instances or [],
    )
