"""The session-job table: one deadline from the job's first call, children in their root's job, per-tenant
keys, and bounded memory (idle expiry, ``kv_retention_s`` keeping a job longer, LRU eviction)."""

from __future__ import annotations

import math

from slosched.core.request import Request
from slosched.gateway.calls.call import Call, SloHeaders
from slosched.gateway.jobs.sessions import SessionJobs


def call(now: float) -> Call:
    request = Request("r", "r", "s", "t", 10, 10, now, now)
    return Call(path="/v1/completions", body={}, stream=False, request=request)


def slo(program: str, parent: str | None = None, deadline_s: float | None = None, **extra: object) -> SloHeaders:
    return SloHeaders(
        tenant=str(extra.pop("tenant", "t")),
        dialect="vllm-router",
        program_id=program,
        parent_id=parent,
        deadline_ms=None if deadline_s is None else deadline_s * 1000.0,
        deadline_from_job=deadline_s is not None,
        **extra,  # type: ignore[arg-type]
    )


def test_grandchildren_join_the_root_and_a_late_deadline_counts_from_the_first_call() -> None:
    table = SessionJobs(idle_s=60.0)
    root = call(0.0)
    table.attach(root, slo("root"), 0.0)
    assert math.isinf(root.request.deadline_s)
    child = call(5.0)
    table.attach(child, slo("child", "root", deadline_s=30.0), 5.0)
    grandchild = call(9.0)
    job = table.attach(grandchild, slo("grandchild", "child"), 9.0)
    assert job is not None and job.id == "root" and job.calls == 3
    assert child.request.deadline_s == grandchild.request.deadline_s == 30.0  # from the root's first call at 0
    assert job.programs == {"child": "root", "grandchild": "child"}


def test_idle_jobs_expire_unless_retained_and_the_table_is_bounded() -> None:
    table = SessionJobs(idle_s=10.0, max_jobs=2)
    table.attach(call(0.0), slo("keep", kv_retention_s=100.0), 0.0)
    assert table.get("t", "keep", 50.0) is not None  # idle 50 s, retained for 100
    assert table.get("t", "keep", 101.0) is None
    for index in range(3):
        table.attach(call(200.0), slo(f"j{index}"), 200.0)
    assert len(table) == 2 and table.get("t", "j0", 200.0) is None  # least recently used, evicted


def test_a_header_deadline_keeps_its_per_call_meaning() -> None:
    table = SessionJobs(idle_s=10.0)
    own = call(3.0)
    own.request.deadline_s = 8.0  # x-slo-deadline-ms: 5 s after this call's arrival
    header = SloHeaders(tenant="t", dialect="dynamo", program_id="p", deadline_ms=5000.0)
    table.attach(own, header, 3.0)
    assert own.request.deadline_s == 8.0 and own.request.job_arrival_s == 3.0
