"""``serve.jobs`` at unit level: ``JobManager`` on a real ``Dispatcher`` with a fake clock and a faked
``complete`` (no backends). Jobs carry their deadline into every call, reach exactly one terminal state,
and are validated, reaped and evicted as documented. (``test_jobs.py`` drives the same API over HTTP.)"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest

from slosched.core.request import Outcome
from slosched.serve.calls import Call, HttpError
from slosched.serve.config import parse_config
from slosched.serve.dispatcher import Dispatcher
from slosched.serve.jobs import JobManager, LiveJob, fill_template


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeBackend:
    """``Dispatcher.complete`` stand-in: answers every call (or fails those whose prompt contains "FAIL")."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.calls: list[Call] = []

    async def complete(self, call: Call) -> tuple[int, bytes]:
        self.calls.append(call)
        if "FAIL" in str(call.body.get("prompt")):
            raise HttpError(502, "backend_failed", "broken")
        call.output_tokens = 2
        self.dispatcher.finish(call, Outcome.COMPLETED, "ok")
        body = {"choices": [{"text": f"echo:{call.body.get('prompt')}"}], "usage": {"completion_tokens": 2}}
        return 200, json.dumps(body).encode()


def make_manager(**overrides: Any) -> tuple[JobManager, FakeBackend, Clock]:
    clock = Clock()
    config = parse_config({"backends": [{"name": "b0", "url": "http://127.0.0.1:9"}], **overrides})
    dispatcher = Dispatcher(config, clock=clock)
    backend = FakeBackend(dispatcher)
    dispatcher.complete = backend.complete  # type: ignore[method-assign]
    return JobManager(dispatcher), backend, clock


def job_outcomes(manager: JobManager) -> dict[str, float]:
    result: dict[str, float] = {}
    for family in manager.dispatcher.metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "slosched_jobs_total" and sample.value:
                result[f"{sample.labels['kind']}/{sample.labels['outcome']}"] = sample.value
    return result


def test_fill_template() -> None:
    assert fill_template("Rate {title} ({year})", {"title": "Up", "year": 2009}, 0) == "Rate Up (2009)"
    assert fill_template("{a} {a.b} {0}", {"a": [1]}, 0) == "[1] {a.b} {0}"  # only plain names are placeholders
    with pytest.raises(HttpError, match=r"rows\[3\]: missing column 'b'"):
        fill_template("{b}", {"a": 1}, 3)
    with pytest.raises(HttpError, match=r"rows\[1\]: expected an object"):
        fill_template("{b}", ["x"], 1)


def test_a_workflow_carries_its_deadline_and_completes_once() -> None:
    async def scenario() -> None:
        manager, backend, clock = make_manager()
        job = manager.create({"kind": "workflow", "slo_s": 30, "template": "sql", "tenant": "t1", "priority": 2})
        assert (job.status, job.deadline_s, job.arrival_s) == ("running", 130.0, 100.0)
        clock.now = 110.0
        answer = await manager.post_stage(job.id, {"name": "plan", "calls": [{"prompt": "a"}, {"prompt": "b"}]})
        assert [r["text"] for r in answer["results"]] == ["echo:a", "echo:b"]
        assert answer["job"]["status"] == "running"
        requests = [call.request for call in backend.calls]
        # The deadline job policy: every call may use all the time the job has left.
        assert {(r.budget_s, r.deadline_s, r.job_arrival_s, r.template) for r in requests} == {
            (20.0, 130.0, 100.0, "sql")
        }
        assert {(r.tenant, r.job_id, r.stage) for r in requests} == {("t1", job.id, "plan")}
        assert backend.calls[0].stream is False
        clock.now = 120.0
        answer = await manager.post_stage(
            job.id, {"calls": [{"messages": [{"role": "user", "content": "c"}]}], "final": True}
        )
        assert answer["stage"] == "stage-1"
        assert answer["job"]["status"] == "completed" and answer["job"]["slo_met"] is True
        assert answer["job"]["latency_s"] == 20.0
        assert job.finished_stages == ["plan", "stage-1"]
        assert manager.finish(job, "failed", "late") is False  # already terminal
        assert job.status == "completed"
        with pytest.raises(HttpError) as error:
            await manager.post_stage(job.id, {"calls": [{"prompt": "x"}]})
        assert error.value.status == 409
        assert job_outcomes(manager) == {"workflow/completed": 1.0}

    asyncio.run(scenario())


def test_a_failed_call_fails_the_workflow() -> None:
    async def scenario() -> None:
        manager, _, _ = make_manager()
        job = manager.create({})
        answer = await manager.post_stage(job.id, {"name": "s", "calls": [{"prompt": "ok"}, {"prompt": "FAIL"}]})
        results = answer["results"]
        assert [r["outcome"] for r in results] == ["completed", "failed"]
        assert results[1]["status"] == 502
        assert job.status == "failed" and job.reason == "stage 's': backend_failed"
        assert job.as_json()["slo_met"] is None  # no SLO

    asyncio.run(scenario())


def test_a_relquery_runs_every_row_and_completes() -> None:
    async def scenario() -> None:
        manager, backend, _ = make_manager()
        body = {"kind": "relquery", "template": "Is {name} a fruit?", "rows": [{"name": "apple"}, {"name": "car"}],
                "params": {"max_tokens": 3}, "slo_s": 5}  # fmt: skip
        job = manager.create(body)
        assert job.task is not None
        await job.task
        assert job.status == "completed"
        assert sorted(call.body["prompt"] for call in backend.calls) == ["Is apple a fruit?", "Is car a fruit?"]
        assert {call.request.max_output_tokens for call in backend.calls} == {3}
        assert {call.request.template for call in backend.calls} == {"relquery"}
        assert [stage["name"] for stage in job.stages] == ["rows"]
        failing = manager.create({**body, "rows": [{"name": "FAIL"}]})
        assert failing.task is not None
        await failing.task
        assert (failing.status, failing.reason) == ("failed", "a row failed")
        assert job_outcomes(manager) == {"relquery/completed": 1.0, "relquery/failed": 1.0}

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "batch"}, "kind"),
        ({"slo_s": 0}, "slo_s"),
        ({"slo_s": True}, "slo_s"),
        ({"priority": math.nan}, "priority"),
        ({"tenant": 5}, "tenant"),
        ({"kind": "relquery", "template": "{a}", "rows": []}, "rows"),
        ({"kind": "relquery", "rows": [{"a": 1}]}, "template"),
        ({"kind": "relquery", "template": "{a}", "rows": [{"a": 1}], "params": [1]}, "params"),
        ({"kind": "relquery", "template": "{a}", "rows": [{"b": 1}]}, "rows[0]"),
    ],
)
def test_invalid_jobs_are_refused_before_they_exist(body: dict[str, Any], field: str) -> None:
    async def scenario() -> None:
        manager, _, _ = make_manager()
        with pytest.raises(HttpError) as error:
            manager.create(body)
        assert error.value.status == 400 and error.value.message.startswith(f"{field}:")
        assert manager.jobs == {}

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("body", "status"),
    [({"calls": []}, 400), ({"calls": [{"prompt": "x"}], "final": "yes"}, 400), ({"calls": [3]}, 400)],
)
def test_invalid_stages_are_refused(body: dict[str, Any], status: int) -> None:
    async def scenario() -> None:
        manager, backend, _ = make_manager()
        job = manager.create({})
        with pytest.raises(HttpError) as error:
            await manager.post_stage(job.id, body)
        assert error.value.status == status and backend.calls == []

    asyncio.run(scenario())


def test_unknown_jobs_and_stages_for_relqueries() -> None:
    async def scenario() -> None:
        manager, _, _ = make_manager()
        with pytest.raises(HttpError) as error:
            manager.get("job-9")
        assert error.value.status == 404
        job = manager.create({"kind": "relquery", "template": "{a}", "rows": [{"a": 1}]})
        with pytest.raises(HttpError) as error:
            await manager.post_stage(job.id, {"calls": [{"prompt": "x"}]})
        assert error.value.status == 409
        await manager.shutdown()

    asyncio.run(scenario())


def test_cancel_reap_and_shutdown_end_each_job_once() -> None:
    async def scenario() -> None:
        manager, _, clock = make_manager(timeouts={"job_idle_s": 10})
        idle, busy, cancelled = manager.create({}), manager.create({}), manager.create({})
        busy.active_stages = 1  # a stage in flight: never reaped
        assert manager.cancel(cancelled.id).status == "cancelled"
        assert manager.cancel(cancelled.id).reason == "cancelled by client"  # idempotent
        clock.now += 10.5
        await manager.reap_idle()
        assert (idle.status, idle.reason) == ("cancelled", "idle timeout")
        assert busy.status == "running"
        await manager.shutdown()
        assert busy.status == "cancelled"
        assert job_outcomes(manager) == {"workflow/cancelled": 3.0}

    asyncio.run(scenario())


def test_too_many_running_jobs_and_eviction_of_finished_ones() -> None:
    async def scenario() -> None:
        manager, _, _ = make_manager(max_jobs=2)
        first, second = manager.create({}), manager.create({})
        with pytest.raises(HttpError) as error:
            manager.create({})
        assert (error.value.status, error.value.retry_after_s) == (429, 1.0)
        manager.finish(first, "completed", "")
        manager.finish(second, "completed", "")
        jobs = [manager.create({}) for _ in range(2)]
        for job in jobs:
            manager.finish(job, "completed", "")
        manager.create({})
        assert first.id not in manager.jobs and second.id not in manager.jobs  # oldest finished dropped
        assert all(job.id in manager.jobs for job in jobs)

    asyncio.run(scenario())


def test_live_job_json() -> None:
    job = LiveJob("job-0", "workflow", "t", "default", 1.0, 2.0, 3.0, 0.0, status="completed", finish_s=3.5)
    view = job.as_json()
    assert view["latency_s"] == 2.5 and view["slo_met"] is False
    assert LiveJob("j", "workflow", "t", "default", 1.0, None, math.inf, 0.0).as_json()["latency_s"] is None
