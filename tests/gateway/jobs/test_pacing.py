"""Workflow stage calls enter the queues within their tenant's fair share (``gateway/jobs/pacing.py``): a tenant
firing a wide stage while another tenant's calls are held takes at most its share of the queues' capacity;
the rest wait outside the queues and run as room frees, none refused."""

from __future__ import annotations

import asyncio
from typing import Any

from slosched.core.request import Outcome
from slosched.gateway.calls.call import Call, HttpError
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.jobs.manager import JobManager
from slosched.gateway.jobs.store.memory import MemoryStore
from slosched.gateway.ops.config import parse_config
from slosched.gateway.ops.identity import Principal

TENANTS = {"a": {"api_keys": ["ka"], "weight": 1}, "b": {"api_keys": ["kb"], "weight": 1}}


class HeldBackend:
    """``Dispatcher.complete`` through the real queues (routing, places, window), each call held until
    ``release``; records the most calls tenant ``a`` held in the queues at once, overall and while a call of
    tenant ``b`` was still in the queues (once ``b`` is gone, ``a`` is alone and may take every place)."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.release = asyncio.Event()
        self.most_held_by_a = 0
        self.most_held_by_a_beside_b = 0
        self.b_in_queues = 0

    async def complete(self, call: Call) -> tuple[int, bytes]:
        queue = self.dispatcher.choose(call.request, set())
        try:
            seq = queue.enqueue(call.request, call.request.prompt_tokens)
        except Exception as error:  # the real path's answer to a full queue
            raise HttpError(429, "queue_full", str(error)) from error
        assert queue.places is not None
        held_by_a = queue.places.held.get("a", 0)
        self.most_held_by_a = max(self.most_held_by_a, held_by_a)
        tenant_b = call.request.tenant == "b"
        self.b_in_queues += tenant_b
        if self.b_in_queues:
            self.most_held_by_a_beside_b = max(self.most_held_by_a_beside_b, held_by_a)
        try:
            await seq.admitted
            await self.release.wait()
        finally:
            self.b_in_queues -= tenant_b  # counted out before the queues let go, so never after they did
            queue.withdraw(seq)
        call.output_tokens = 1
        self.dispatcher.finish(call, Outcome.COMPLETED, "ok")
        return 200, b'{"choices": [{"text": "x"}], "usage": {"completion_tokens": 1}}'


def _manager(**overrides: Any) -> tuple[JobManager, HeldBackend]:
    backend = {"name": "b0", "url": "http://127.0.0.1:9", "max_concurrency": 2, "max_queue": 8}
    config = parse_config({"backends": [backend], "tenants": TENANTS, "job_store": "memory://", **overrides})
    dispatcher = Dispatcher(config)
    held = HeldBackend(dispatcher)
    dispatcher.complete = held.complete  # type: ignore[method-assign]
    return JobManager(dispatcher, MemoryStore(), replica="r1"), held


async def _stage(manager: JobManager, tenant: str, calls: int) -> dict[str, Any]:
    principal = Principal(tenant=tenant)
    job = await manager.create({"kind": "workflow"}, principal)
    stage = {"name": "wide", "calls": [{"prompt": f"{tenant}{i}", "max_tokens": 1} for i in range(calls)]}
    return await manager.post_stage(job["id"], stage, principal)


def test_a_wide_stage_takes_at_most_its_tenant_s_share_while_another_tenant_holds_calls() -> None:
    async def scenario() -> None:
        manager, held = _manager()
        dispatcher = manager.dispatcher
        others = asyncio.create_task(_stage(manager, "b", 2))  # b's two calls run and are held
        await asyncio.sleep(0.05)
        wide = asyncio.create_task(_stage(manager, "a", 10))
        await asyncio.sleep(0.2)
        share = dispatcher.capacity() // 2  # weights 1:1 over a capacity of 2 running + 8 places
        assert held.most_held_by_a == share  # not 8: the queues' free places
        assert dispatcher.tenant_room("a") == 0 and not wide.done()
        held.release.set()
        answers = await asyncio.wait_for(asyncio.gather(others, wide), 5.0)
        for answer in answers:
            assert {result["outcome"] for result in answer["results"]} == {"completed"}  # none refused
            assert answer["job"]["status"] == "running"
        assert held.most_held_by_a_beside_b == share  # b's calls leaving may let a fill the queues, not before

    asyncio.run(scenario())


def test_a_tenant_alone_is_not_paced_and_a_paced_call_times_out_like_a_queued_one() -> None:
    async def scenario() -> None:
        manager, held = _manager(timeouts={"queue_s": 0.1})
        alone = asyncio.create_task(_stage(manager, "a", 10))
        await asyncio.sleep(0.05)
        assert held.most_held_by_a == 10  # alone: every free place, as without fair sharing
        held.release.set()
        await asyncio.wait_for(alone, 5.0)
        held.release.clear()
        held.most_held_by_a = 0
        others = asyncio.create_task(_stage(manager, "b", 2))
        await asyncio.sleep(0.05)
        paced = asyncio.create_task(_stage(manager, "a", 7))  # 5 within its share, 2 wait past queue_s
        await asyncio.sleep(0.3)
        held.release.set()
        answer, _ = await asyncio.wait_for(asyncio.gather(paced, others), 5.0)
        reasons = sorted(result["reason"] for result in answer["results"])
        assert held.most_held_by_a == 5 and reasons == ["ok"] * 5 + ["queue_timeout"] * 2, reasons
        assert answer["job"]["status"] == "failed"

    asyncio.run(scenario())
