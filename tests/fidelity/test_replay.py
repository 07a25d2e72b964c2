"""Trace replay against the in-process stub engine: timing records, stage order, prompts (about 2 s)."""

from __future__ import annotations

import asyncio

import pytest

from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.core.request import Outcome
from slosched.devtools.stub import StubBackend, StubBehaviour, serve_app
from slosched.fidelity.replay import replay_async

DELAY_S = 0.01


def _jobs() -> list[JobSpec]:
    chain = (
        StageSpec("first", (CallSpec(40, 3, None, "db", 30), CallSpec(50, 5, None, "db", 30))),
        StageSpec("tool", (), tool_duration_s=0.05),
        StageSpec("last", (CallSpec(20, 4),)),
    )
    return [
        JobSpec("solo", JobKind.SINGLE, 0.0, (StageSpec("call", (CallSpec(10, 6),)),)),
        JobSpec("flow", JobKind.WORKFLOW, 0.1, chain),
    ]


def test_replay_records_every_call_in_stage_order() -> None:
    stub = StubBackend(behaviour=StubBehaviour(token_delay_s=DELAY_S))

    async def go():  # type: ignore[no-untyped-def]
        async with serve_app(stub.app()) as url:
            return await replay_async(url, _jobs())

    result = asyncio.run(go())
    assert [job.outcome for job in result.jobs] == [Outcome.COMPLETED] * 2
    requests = {(r.job_id, r.stage, r.output_tokens): r for r in result.requests}
    assert sorted(k[2] for k in requests) == [3, 4, 5, 6]
    assert all(r.outcome is Outcome.COMPLETED for r in result.requests)
    first_stage = [r for r in result.requests if r.stage == "first"]
    (last,) = [r for r in result.requests if r.stage == "last"]
    # The last stage waits for both calls of the first and for the 50 ms tool step.
    assert last.arrival_s >= max(r.finish_s for r in first_stage) + 0.05
    assert min(r.arrival_s for r in first_stage) == pytest.approx(0.1, abs=0.05)
    for record in result.requests:
        assert record.arrival_s < record.first_token_s <= record.finish_s
        assert record.latency_s >= record.output_tokens * DELAY_S * 0.9
    flow = next(job for job in result.jobs if job.id == "flow")
    assert flow.finish_s == pytest.approx(last.finish_s, abs=0.02)
    # Prompts are token ids of the exact length; calls with one prefix key share that prefix.
    bodies = [body for _, body in stub.received]
    assert sorted(len(body["prompt"]) for body in bodies) == [10, 20, 40, 50]
    sharing = [body["prompt"] for body in bodies if len(body["prompt"]) in (40, 50)]
    assert sharing[0][:30] == sharing[1][:30] and sharing[0][30:35] != sharing[1][30:35]
    assert all(body["ignore_eos"] and body["stream"] for body in bodies)


def test_a_failing_engine_marks_calls_and_jobs_failed() -> None:
    stub = StubBackend(behaviour=StubBehaviour(status=500))

    async def go():  # type: ignore[no-untyped-def]
        async with serve_app(stub.app()) as url:
            return await replay_async(url, _jobs()[:1])

    result = asyncio.run(go())
    assert result.jobs[0].outcome is Outcome.FAILED
    assert result.requests[0].outcome is Outcome.FAILED and "500" in result.requests[0].reason
