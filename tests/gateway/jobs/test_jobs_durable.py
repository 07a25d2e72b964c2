"""Durable jobs: two ``JobManager`` replicas over one store (a shared memory store, and SQLite files) —
restart resumes a relQuery in flight, a workflow stage lost in a crash is reported, stale replicas' jobs
are claimed, jobs are readable and cancellable from another replica, retention drops old records."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slosched.core.request import Outcome
from slosched.gateway.calls.call import Call, HttpError
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.jobs.manager import JobManager
from slosched.gateway.jobs.store import open_store
from slosched.gateway.jobs.store.base import JobRecord, JobStore
from slosched.gateway.jobs.store.memory import MemoryData, MemoryStore
from slosched.gateway.ops.config import parse_config
from slosched.gateway.ops.identity import Principal

ME = Principal(tenant="acme")


class Wall:
    """The replicas' shared Unix clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


class Backend:
    """``Dispatcher.complete`` stand-in: prompts containing "BLOCK" wait until ``release`` is set."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.prompts: list[str] = []
        self.release = asyncio.Event()

    async def complete(self, call: Call) -> tuple[int, bytes]:
        prompt = str(call.body.get("prompt"))
        self.prompts.append(prompt)
        if "BLOCK" in prompt:
            await self.release.wait()
        self.dispatcher.finish(call, Outcome.COMPLETED, "ok")
        return 200, json.dumps({"choices": [{"text": f"echo:{prompt}"}]}).encode()


def replica(store: JobStore, name: str, wall: Callable[[], float], **overrides: Any) -> tuple[JobManager, Backend]:
    config = parse_config({"backends": [{"name": "b0", "url": "http://127.0.0.1:9"}], **overrides})
    dispatcher = Dispatcher(config)
    backend = Backend(dispatcher)
    dispatcher.complete = backend.complete  # type: ignore[method-assign]
    return JobManager(dispatcher, store, replica=name, wall=wall), backend


async def eventually(check: Callable[[], Any], timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.01)):
        if await check() if asyncio.iscoroutinefunction(check) else check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


def stores(kind: str, tmp_path: Path) -> tuple[JobStore, JobStore]:
    if kind == "memory":
        data = MemoryData()
        return MemoryStore(data), MemoryStore(data)
    url = f"sqlite:///{tmp_path}/jobs.sqlite3"
    return open_store(url), open_store(url)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_restarted_replica_resumes_a_relquery_in_flight(kind: str, tmp_path: Path) -> None:
    async def scenario() -> None:
        wall = Wall()
        first_store, second_store = stores(kind, tmp_path)
        first, first_backend = replica(first_store, "r1", wall)
        await first.start()
        rows = [{"x": "a"}, {"x": "BLOCK-b"}, {"x": "c"}, {"x": "BLOCK-d"}]
        job_id = (await first.create({"kind": "relquery", "template": "{x}", "rows": rows, "slo_s": 60}, ME))["id"]

        async def two_answered() -> bool:
            record = await second_store.get(job_id)
            return record is not None and sum(r is not None for r in record.stages[0]["results"]) == 2

        await eventually(two_answered)
        # The replica dies (no shutdown: nothing more is written); a replica of the same name starts.
        second, second_backend = replica(second_store, "r1", wall)
        second_backend.release.set()
        await second.start()
        job = second.jobs[job_id]
        assert job.task is not None
        await job.task
        assert job.status == "completed"
        assert sorted(second_backend.prompts) == ["BLOCK-b", "BLOCK-d"]  # only the unanswered rows
        view = await second.get(job_id, ME)
        assert [r["text"] for r in view["stages"][0]["results"]] == ["echo:a", "echo:BLOCK-b", "echo:c", "echo:BLOCK-d"]
        await eventually(lambda: job_id not in second.jobs)
        record = await second_store.get(job_id)
        assert record is not None and (record.status, record.owner) == ("completed", "r1")
        first_backend.release.set()
        await second.shutdown()
        await first.shutdown()

    asyncio.run(scenario())


def test_a_workflow_stage_lost_in_a_crash_is_reported_and_the_job_goes_on() -> None:
    async def scenario() -> None:
        wall, data = Wall(), MemoryData()
        first, first_backend = replica(MemoryStore(data), "r1", wall)
        job_id = (await first.create({"slo_s": 100}, ME))["id"]
        stage = asyncio.create_task(first.post_stage(job_id, {"name": "s0", "calls": [{"prompt": "BLOCK"}]}, ME))
        await eventually(lambda: data.records[job_id].stages and data.records[job_id].stages[0]["status"] == "running")
        second, _ = replica(MemoryStore(data), "r1", wall, timeouts={"job_idle_s": 0.2})
        await second.start()
        view = await second.get(job_id, ME)
        assert view["status"] == "running"
        assert view["stages"][0] | {"results": []} == {
            "name": "s0",
            "status": "failed",
            "reason": "replica_restarted",
            "results": [],
        }
        answer = await second.post_stage(job_id, {"name": "s0", "calls": [{"prompt": "again"}], "final": True}, ME)
        assert answer["job"]["status"] == "completed"
        # A job resumed and then abandoned by its client is ended by the idle reaper, never left running.
        abandoned = (await second.create({}, ME))["id"]
        await asyncio.sleep(0.3)
        await second.reap_idle()
        assert (await second.get(abandoned, ME))["reason"] == "idle timeout"
        stage.cancel()
        first_backend.release.set()
        await asyncio.gather(stage, return_exceptions=True)
        await second.shutdown()

    asyncio.run(scenario())


def test_stale_replicas_jobs_are_claimed_and_jobs_are_shared_across_replicas() -> None:
    async def scenario() -> None:
        wall, data = Wall(), MemoryData()
        first, _ = replica(MemoryStore(data), "r1", wall, job_heartbeat_s=1.0)
        second, second_backend = replica(MemoryStore(data), "r2", wall, job_heartbeat_s=1.0)
        await first.start()
        await second.start()
        rows = [{"x": "BLOCK"}]
        job_id = (await first.create({"kind": "relquery", "template": "{x}", "rows": rows}, ME))["id"]
        # Readable from the other replica (the store), still 404 for another tenant there.
        assert (await second.get(job_id, ME))["status"] == "running"
        with pytest.raises(HttpError) as error:
            await second.get(job_id, Principal("other"))
        assert error.value.status == 404
        wall.now += 2.0  # r1 is alive: nothing is claimed
        await first.sync.beat()
        await second.sync.beat()
        assert job_id not in second.jobs
        wall.now += 10.0  # r1 went silent for more than 3 heartbeats
        second_backend.release.set()
        await second.sync.beat()
        assert job_id in second.jobs
        await eventually(lambda: data.records[job_id].status == "completed")
        assert data.records[job_id].owner == "r2"
        await first.shutdown()
        await second.shutdown()

    asyncio.run(scenario())


async def _two_replicas_with_a_running_relquery() -> tuple[MemoryData, JobManager, JobManager, str]:
    """Replicas r1 and r2 on one store; r1 owns a relQuery whose 3 row calls are accepted and blocked."""
    wall, data = Wall(), MemoryData()
    first, _ = replica(MemoryStore(data), "r1", wall)
    second, _ = replica(MemoryStore(data), "r2", wall)
    rows = [{"x": "BLOCK"}] * 3
    job_id = (await first.create({"kind": "relquery", "template": "{x}", "rows": rows}, ME))["id"]
    accepted = first.dispatcher.metrics.accepted._value
    await eventually(lambda: accepted.get() == 3)
    return data, first, second, job_id


def test_cancel_through_another_replica_stops_the_owner() -> None:
    async def scenario() -> None:
        data, first, second, job_id = await _two_replicas_with_a_running_relquery()
        with pytest.raises(HttpError) as error:
            await second.complete(job_id, ME)
        assert (error.value.status, error.value.code) == (409, "job_elsewhere")
        assert (await second.cancel(job_id, ME))["status"] == "cancelled"
        job = first.jobs[job_id]
        await first.sync.beat()  # the owner notices at its next heartbeat
        assert (job.status, job.reason) == ("cancelled", "cancelled by client")
        assert job.task is not None
        await asyncio.gather(job.task, return_exceptions=True)
        outcomes = {
            s.labels["outcome"]: s.value
            for f in first.dispatcher.metrics.registry.collect()
            for s in f.samples
            if s.name == "slosched:requests_total"
        }
        assert outcomes == {"cancelled": 3.0}  # every accepted row call ended, none leaked
        await first.shutdown()
        assert data.records[job_id].status == "cancelled"

    asyncio.run(scenario())


def test_a_cancel_through_another_replica_survives_the_owners_next_write() -> None:
    """The owner writes progress after another replica stored the cancel: the write must not revive the
    job (the store keeps a terminal record), and the owner stops the job at once, not at its next beat."""

    async def scenario() -> None:
        data, first, second, job_id = await _two_replicas_with_a_running_relquery()
        assert (await second.cancel(job_id, ME))["status"] == "cancelled"
        job = first.jobs[job_id]
        assert job.status == "running"
        first.sync.touch(job)  # a progress write, before any heartbeat
        await eventually(lambda: job.status == "cancelled")
        assert data.records[job_id].status == "cancelled" and data.records[job_id].reason == "cancelled by client"
        assert job.task is not None
        await asyncio.gather(job.task, return_exceptions=True)
        await first.sync.beat()
        await first.shutdown()
        assert data.records[job_id].status == "cancelled"
        await second.shutdown()

    asyncio.run(scenario())


def test_retention_drops_old_finished_records() -> None:
    async def scenario() -> None:
        wall, data = Wall(), MemoryData()
        manager, _ = replica(MemoryStore(data), "r1", wall, job_retention_s=60)
        job_id = (await manager.create({}, ME))["id"]
        await manager.cancel(job_id, ME)
        wall.now += 30
        await manager.sync.beat()
        assert job_id in data.records
        wall.now += 31
        await manager.sync.beat()
        assert job_id not in data.records
        with pytest.raises(HttpError) as error:
            await manager.get(job_id, ME)
        assert error.value.status == 404

    asyncio.run(scenario())


class FlakyStore(MemoryStore):
    """A memory store whose writes fail while ``down`` (a database outage)."""

    def __init__(self) -> None:
        super().__init__(MemoryData())
        self.down = False

    async def put(self, record: Any) -> bool:
        if self.down:
            raise ConnectionError("store down")
        return await super().put(record)


def test_a_finished_job_stays_readable_until_the_store_holds_its_terminal_record() -> None:
    async def scenario() -> None:
        store = FlakyStore()
        manager, _backend = replica(store, "r1", Wall())
        await manager.start()
        job_id = (await manager.create({"kind": "workflow", "slo_s": 60}, ME))["id"]
        store.down = True
        finished = await manager.complete(job_id, ME)
        assert finished["status"] == "completed"
        assert (await manager.get(job_id, ME))["status"] == "completed"  # not lost while the store is down
        assert job_id in manager.jobs
        store.down = False
        await manager.sync.beat()  # the heartbeat retries the unsaved terminal record
        await eventually(lambda: job_id not in manager.jobs)
        record = await store.get(job_id)
        assert record is not None and record.status == "completed"
        assert (await manager.get(job_id, ME))["status"] == "completed"  # now read back from the store
        await manager.shutdown()

    asyncio.run(scenario())


class SlowBackend(Backend):
    """Every call takes ``delay_s`` (it started when its prompt is recorded)."""

    delay_s = 0.1

    async def complete(self, call: Call) -> tuple[int, bytes]:
        self.prompts.append(str(call.body.get("prompt")))
        await asyncio.sleep(self.delay_s)
        self.dispatcher.finish(call, Outcome.COMPLETED, "ok")
        return 200, json.dumps({"choices": [{"text": "ok"}]}).encode()


def _slow_replica(store: JobStore, name: str, wall: Callable[[], float]) -> tuple[JobManager, SlowBackend]:
    backend_entry = {"name": "b0", "url": "http://127.0.0.1:9", "max_concurrency": 4, "max_queue": 4}
    dispatcher = Dispatcher(parse_config({"backends": [backend_entry]}))
    backend = SlowBackend(dispatcher)
    dispatcher.complete = backend.complete  # type: ignore[method-assign]
    return JobManager(dispatcher, store, replica=name, wall=wall), backend


def test_after_a_cancel_through_another_replica_the_owner_starts_few_more_backend_calls(tmp_path: Path) -> None:
    """Two replicas on one SQLite store; the job is cancelled through the replica that does not run it. Its
    owner must stop releasing rows promptly (calls in flight may finish): at most one capacity's worth of
    calls (8: window 4 + queue 4) starts after the cancel, not rows until its next progress write is refused
    (writes take 0.3 s here, and a relQuery's progress is written at most every second)."""

    async def scenario() -> None:
        wall = Wall()
        first_store, second_store = stores("sqlite", tmp_path)
        put = first_store.put

        async def slow_put(record: JobRecord) -> bool:
            await asyncio.sleep(0.3)
            return await put(record)

        first_store.put = slow_put  # type: ignore[method-assign]
        first, backend = _slow_replica(first_store, "r1", wall)
        second, _ = _slow_replica(second_store, "r2", wall)
        rows = [{"x": index} for index in range(400)]
        job_id = (await first.create({"kind": "relquery", "template": "row {x}", "rows": rows}, ME))["id"]
        await eventually(lambda: len(backend.prompts) >= 12)
        assert (await second.cancel(job_id, ME))["status"] == "cancelled"
        started = len(backend.prompts)
        job = first.jobs[job_id]
        await asyncio.sleep(2.0)  # past the owner's next progress write: no more rows start meanwhile
        assert (job.status, job.reason) == ("cancelled", "cancelled by client")
        assert len(backend.prompts) - started <= 8
        assert job.task is not None
        await asyncio.gather(job.task, return_exceptions=True)
        await first.shutdown()
        await second.shutdown()

    asyncio.run(scenario())
