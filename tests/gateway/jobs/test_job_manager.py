"""``gateway.jobs.manager`` at unit level: ``JobManager`` on a real ``Dispatcher`` with a fake clock and a faked
``complete`` (no backends). Jobs carry their deadline into every call, reach exactly one terminal state,
and are validated, reaped and evicted as documented. (``test_jobs.py`` drives the same API over HTTP.)"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest

from slosched.core.request import Outcome
from slosched.gateway.calls.call import Call, HttpError
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.jobs.body import fill_template
from slosched.gateway.jobs.live import LiveJob
from slosched.gateway.jobs.manager import JobManager
from slosched.gateway.jobs.store.memory import MemoryData, MemoryStore
from slosched.gateway.ops.config import parse_config
from slosched.gateway.ops.identity import Principal

ME = Principal(tenant="t1")


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


def make_manager(data: MemoryData | None = None, **overrides: Any) -> tuple[JobManager, FakeBackend, Clock]:
    clock = Clock()
    config = parse_config({"backends": [{"name": "b0", "url": "http://127.0.0.1:9"}], **overrides})
    dispatcher = Dispatcher(config, clock=clock)
    backend = FakeBackend(dispatcher)
    dispatcher.complete = backend.complete  # type: ignore[method-assign]
    return JobManager(dispatcher, MemoryStore(data), replica="r1", wall=lambda: clock.now + 1e9), backend, clock


async def create(manager: JobManager, body: dict[str, Any], principal: Principal = ME) -> LiveJob:
    return manager.jobs[(await manager.create(body, principal))["id"]]


def job_outcomes(manager: JobManager) -> dict[str, float]:
    result: dict[str, float] = {}
    for family in manager.dispatcher.metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "slosched:jobs_total" and sample.value:
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
        job = await create(manager, {"kind": "workflow", "slo_s": 30, "template": "sql", "tenant": "t1", "priority": 2})
        assert (job.status, job.deadline_s, job.arrival_s) == ("running", 130.0, 100.0)
        assert job.id.startswith("job-") and len(job.id) >= 20  # unguessable, not sequential
        clock.now = 110.0
        answer = await manager.post_stage(job.id, {"name": "plan", "calls": [{"prompt": "a"}, {"prompt": "b"}]}, ME)
        assert [r["text"] for r in answer["results"]] == ["echo:a", "echo:b"]
        assert answer["job"]["status"] == "running"
        requests = [call.request for call in backend.calls]
        # The deadline job policy: every call may use all the time the job has left.
        assert {(r.budget_s, r.deadline_s, r.job_arrival_s, r.template) for r in requests} == {
            (20.0, 130.0, 100.0, "sql")
        }
        assert {(r.tenant, r.job_id, r.stage, r.priority) for r in requests} == {("t1", job.id, "plan", 2.0)}
        assert backend.calls[0].stream is False
        clock.now = 120.0
        answer = await manager.post_stage(
            job.id, {"calls": [{"messages": [{"role": "user", "content": "c"}]}], "final": True}, ME
        )
        assert answer["stage"] == "stage-1"
        assert answer["job"]["status"] == "completed" and answer["job"]["slo_met"] is True
        assert answer["job"]["latency_s"] == 20.0
        assert job.finished_stages == ["plan", "stage-1"]
        assert manager.finish(job, "failed", "late") is False  # already terminal
        assert job.status == "completed"
        assert job.id not in manager.jobs  # finished: left memory, the store answers
        stored = await manager.get(job.id, ME)
        assert (stored["status"], stored["latency_s"], stored["slo_met"]) == ("completed", 20.0, True)
        assert [stage["status"] for stage in stored["stages"]] == ["completed", "completed"]
        with pytest.raises(HttpError) as error:
            await manager.post_stage(job.id, {"calls": [{"prompt": "x"}]}, ME)
        assert error.value.status == 409
        assert job_outcomes(manager) == {"workflow/completed": 1.0}

    asyncio.run(scenario())


def test_a_failed_call_fails_the_workflow() -> None:
    async def scenario() -> None:
        manager, _, _ = make_manager()
        job = await create(manager, {})
        answer = await manager.post_stage(job.id, {"name": "s", "calls": [{"prompt": "ok"}, {"prompt": "FAIL"}]}, ME)
        results = answer["results"]
        assert [r["outcome"] for r in results] == ["completed", "failed"]
        assert results[1]["status"] == 502
        assert job.status == "failed" and job.reason == "stage 's': backend_failed"
        assert job.as_json()["slo_met"] is None  # no SLO

    asyncio.run(scenario())


def test_a_relquery_runs_every_row_and_completes() -> None:
    async def scenario() -> None:
        manager, backend, _ = make_manager()
        body = {
            "kind": "relquery",
            "template": "Is {name} a fruit?",
            "rows": [{"name": "apple"}, {"name": "car"}],
            "params": {"max_tokens": 3},
            "slo_s": 5,
        }
        job = await create(manager, body)
        assert job.task is not None
        await job.task
        assert job.status == "completed"
        assert sorted(call.body["prompt"] for call in backend.calls) == ["Is apple a fruit?", "Is car a fruit?"]
        assert {call.request.max_output_tokens for call in backend.calls} == {3}
        assert {call.request.template for call in backend.calls} == {"relquery"}
        assert [stage["name"] for stage in job.stages] == ["rows"]
        failing = await create(manager, {**body, "rows": [{"name": "FAIL"}]})
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
        ({"slo_s": 1e306}, "slo_s"),
        ({"slo_s": 10**400}, "slo_s"),
        ({"priority": math.nan}, "priority"),
        ({"priority": math.inf}, "priority"),
        ({"tenant": 5}, "tenant"),
        ({"kind": "relquery", "template": "{a}", "rows": []}, "rows"),
        ({"kind": "relquery", "rows": [{"a": 1}]}, "template"),
        ({"kind": "relquery", "template": "{a}", "rows": [{"a": 1}], "params": [1]}, "params"),
        (
            {"kind": "relquery", "template": "{a}", "rows": [{"a": 1}], "params": {"max_tokens": 10**400}},
            "params.max_tokens",
        ),
        (
            {"kind": "relquery", "template": "{a}", "rows": [{"a": 1}], "params": {"max_tokens": 4096}},
            "params.max_tokens",
        ),
        (
            {"kind": "relquery", "template": "{a}", "rows": [{"a": 1}], "params": {"temperature": math.inf}},
            "params.temperature",
        ),
        ({"kind": "relquery", "template": "{a}", "rows": [{"b": 1}]}, "rows[0]"),
        ({"kind": "relquery", "template": "{a}", "rows": [{"a": 1}] * 10_001}, "rows"),
        ({"rows": [{"a": 1}]}, "rows"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_invalid_jobs_are_refused_before_they_exist(body: dict[str, Any], field: str) -> None:
    async def scenario() -> None:
        manager, _, _ = make_manager()
        with pytest.raises(HttpError) as error:
            await manager.create(body, ME)
        assert error.value.status == 400 and error.value.message.startswith(f"{field}:"), error.value.message
        assert len(error.value.message) < 300
        assert manager.jobs == {} and manager.sync.store.data.records == {}  # type: ignore[attr-defined]

    asyncio.run(scenario())


def test_large_inputs_are_never_echoed_and_huge_expansions_are_413() -> None:
    async def scenario() -> None:
        manager, _, _ = make_manager()
        big = "x" * 3_900_000
        for body in ({"template": big}, {"tenant": big}, {"kind": big}, {"slo_s": big}):
            with pytest.raises(HttpError) as error:
                await manager.create(body, ME)
            assert error.value.status == 400 and len(error.value.message) < 300, error.value.message
        # 125 KB of body expanding to 2,000 prompts of 100 KB: refused before a single prompt is rendered.
        rows = [{"a": 1}] * 2_000
        with pytest.raises(HttpError) as error:
            await manager.create({"kind": "relquery", "template": "{a}" + "y" * 99_000, "rows": rows}, ME)
        assert (error.value.status, error.value.code) == (413, "prompts_too_large")
        assert error.value.message.startswith("rows:")
        assert manager.jobs == {}

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"calls": []}, "calls"),
        ({"calls": [{"prompt": "x"}], "final": "yes"}, "final"),
        ({"calls": [3]}, "calls[0]"),
        ({"calls": [{"prompt": "ok"}, {"prompt": "x", "max_tokens": 10**400}]}, "calls[1].max_tokens"),
        ({"calls": [{"prompt": "ok"}, {"prompt": "x", "max_tokens": 1e306}]}, "calls[1].max_tokens"),
        ({"calls": [{"prompt": "ok"}, {"prompt": "x", "temperature": -math.inf}]}, "calls[1].temperature"),
        ({"calls": [{"prompt": "ok"}, {"prompt": 5}]}, "calls[1].prompt"),
    ],
)
def test_invalid_stages_are_refused_whole(body: dict[str, Any], field: str) -> None:
    async def scenario() -> None:
        manager, backend, _ = make_manager()
        job = await create(manager, {})
        with pytest.raises(HttpError) as error:
            await manager.post_stage(job.id, body, ME)
        assert error.value.status == 400 and error.value.message.startswith(f"{field}:"), error.value.message
        assert backend.calls == [] and job.stages == []
        # Nothing accepted, nothing leaked: accepted == terminal (both zero).
        metrics = manager.dispatcher.metrics
        assert metrics.accepted._value.get() == 0

    asyncio.run(scenario())


def test_jobs_are_scoped_to_their_tenant() -> None:
    async def scenario() -> None:
        manager, _, _ = make_manager()
        other = Principal(tenant="t2")
        job = await create(manager, {"slo_s": 10})
        for operation in (
            manager.get(job.id, other),
            manager.cancel(job.id, other),
            manager.complete(job.id, other),
            manager.post_stage(job.id, {"calls": [{"prompt": "x"}]}, other),
            manager.get("job-missing", ME),
        ):
            with pytest.raises(HttpError) as error:
                await operation
            assert (error.value.status, error.value.code) == (404, "not_found")
        assert job.status == "running"
        with pytest.raises(HttpError) as error:  # a tenant cannot name another in the body
            await manager.create({"tenant": "t2"}, ME)
        assert error.value.status == 403
        assert (await manager.complete(job.id, ME))["status"] == "completed"
        with pytest.raises(HttpError) as error:  # finished, in the store only: still scoped
            await manager.get(job.id, other)
        assert error.value.status == 404

    asyncio.run(scenario())


def test_per_tenant_cap_and_min_slo_and_priority_class() -> None:
    async def scenario() -> None:
        manager, _, _ = make_manager(max_jobs_per_tenant=2, max_jobs=10)
        for _ in range(2):
            await create(manager, {})
        with pytest.raises(HttpError) as error:
            await manager.create({}, ME)
        assert (error.value.status, error.value.code, error.value.retry_after_s) == (429, "too_many_jobs", 1.0)
        other = await create(manager, {}, Principal(tenant="t2"))  # another tenant is not affected
        assert other.status == "running"
        capped = Principal(tenant="t3", max_jobs=1, min_slo_s=5.0, priority=3.0)
        job = await create(manager, {"slo_s": 0.5, "priority": 0}, capped)
        assert (job.slo_s, job.priority) == (5.0, 3.0)  # clamped to the tenant's floor and class
        with pytest.raises(HttpError):
            await manager.create({}, capped)
        await manager.cancel(job.id, capped)
        assert (await create(manager, {"priority": 7}, capped)).priority == 7.0  # lower priority is allowed

    asyncio.run(scenario())


def test_unknown_jobs_and_stages_for_relqueries() -> None:
    async def scenario() -> None:
        manager, _, _ = make_manager()
        with pytest.raises(HttpError) as error:
            await manager.get("job-9", ME)
        assert error.value.status == 404
        job = await create(manager, {"kind": "relquery", "template": "{a}", "rows": [{"a": 1}]})
        with pytest.raises(HttpError) as error:
            await manager.post_stage(job.id, {"calls": [{"prompt": "x"}]}, ME)
        assert error.value.status == 409
        await manager.shutdown()

    asyncio.run(scenario())


def test_cancel_and_reap_end_each_job_once_and_shutdown_keeps_open_ones() -> None:
    async def scenario() -> None:
        manager, _, clock = make_manager(timeouts={"job_idle_s": 10})
        idle, busy, cancelled = await create(manager, {}), await create(manager, {}), await create(manager, {})
        busy.active_stages = 1  # a stage in flight: never reaped
        assert (await manager.cancel(cancelled.id, ME))["status"] == "cancelled"
        assert (await manager.cancel(cancelled.id, ME))["reason"] == "cancelled by client"  # idempotent
        clock.now += 10.5
        await manager.reap_idle()
        assert (idle.status, idle.reason) == ("cancelled", "idle timeout")
        assert busy.status == "running"
        await manager.shutdown()
        assert busy.status == "running"  # stays open in the store for a restart to resume
        assert manager.sync.store.data.records[busy.id].status == "running"  # type: ignore[attr-defined]
        assert job_outcomes(manager) == {"workflow/cancelled": 2.0}

    asyncio.run(scenario())


def test_too_many_running_jobs_and_finished_ones_leave_memory() -> None:
    async def scenario() -> None:
        manager, _, _ = make_manager(max_jobs=2)
        first, _ = await create(manager, {}), await create(manager, {}, Principal("t2"))
        with pytest.raises(HttpError) as error:
            await manager.create({}, Principal("t3"))
        assert (error.value.status, error.value.retry_after_s) == (429, 1.0)
        await manager.complete(first.id, ME)
        assert first.id not in manager.jobs and len(manager.jobs) == 1
        assert (await manager.get(first.id, ME))["status"] == "completed"
        await create(manager, {})

    asyncio.run(scenario())


def test_live_job_json() -> None:
    job = LiveJob("job-0", "workflow", "t", "default", 1.0, 2.0, 3.0, 0.0, status="completed", finish_s=3.5)
    view = job.as_json()
    assert view["latency_s"] == 2.5 and view["slo_met"] is False
    assert LiveJob("j", "workflow", "t", "default", 1.0, None, math.inf, 0.0).as_json()["latency_s"] is None
