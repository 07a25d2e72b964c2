"""``Dispatcher.reconfigure``: a reload swaps the whole slot set; unchanged backends keep their slot (queue,
predictor, client), a busy removed backend drains at the tail as a retired slot, an idle one is dropped."""

from __future__ import annotations

import asyncio
from typing import Any

from slosched.core.request import Request
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.dispatch.retired import RetiredBackend
from slosched.gateway.ops.config import GatewayConfig, parse_config
from slosched.policies.job.critical_path import CriticalPathBudget
from tests.gateway.helpers import make_request


def _config(names: list[str], backend_overrides: dict[str, Any] | None = None, **overrides: Any) -> GatewayConfig:
    backends = [
        {"name": name, "url": f"http://127.0.0.1:{9 + i}", "max_concurrency": 2, "model": "Llama-3-8B"}
        | (backend_overrides or {})
        for i, name in enumerate(names)
    ]
    return parse_config({"backends": backends, "policies": {"router": "round-robin"}, **overrides})


def test_a_config_with_the_same_backends_keeps_every_slot_and_swaps_only_the_config() -> None:
    async def scenario() -> None:
        dispatcher = Dispatcher(_config(["a", "b"]))
        queues, router = dispatcher.queues, dispatcher.router
        new = _config(["a", "b"], default_max_tokens=99)
        await dispatcher.reconfigure(new)
        assert dispatcher.config is new
        assert dispatcher.queues == queues and dispatcher.router is router

    asyncio.run(scenario())


def test_a_changed_backend_list_keeps_unchanged_slots_and_drains_a_busy_removed_one() -> None:
    async def scenario() -> None:
        dispatcher = Dispatcher(_config(["a", "b", "c"]))
        a, b = dispatcher.backends[0], dispatcher.backends[1]
        queue_a, predictor_a, router = dispatcher.queues[0], dispatcher.predictors[0], dispatcher.router
        busy = dispatcher.queues[1].enqueue(make_request(1, 0.0), 50)  # b holds a call; c is idle
        await dispatcher.reconfigure(_config(["a", "d"]))
        names = [backend.name for backend in dispatcher.backends]
        assert names == ["a", "d", "b"]  # c dropped at once, b retired at the tail
        assert dispatcher.backends[0] is a and dispatcher.queues[0] is queue_a
        assert dispatcher.predictors[0] is predictor_a
        retired = dispatcher.backends[2]
        assert isinstance(retired, RetiredBackend) and retired.original is b and not retired.routable()
        assert b.index == 2 and dispatcher.queues[2].index == 2  # calls in flight hold the original
        assert dispatcher.router is not router and dispatcher.draining
        assert dispatcher.choose(make_request(2, 0.0), set()).index in (0, 1)  # never the retired slot
        dispatcher.queues[2].withdraw(busy)
        await asyncio.wait_for(dispatcher.drain_retired(), 5.0)
        assert [backend.name for backend in dispatcher.backends] == ["a", "d"] and not dispatcher.draining
        await dispatcher.stop()

    asyncio.run(scenario())


def _tenant_request(index: int, tenant: str) -> Request:
    request = make_request(index, 0.0)
    request.tenant = tenant
    return request


def test_a_reload_with_the_same_backends_applies_tenant_weights_and_bands_to_the_queues() -> None:
    """Fair sharing configured by a reload reaches the existing queues (slots and places), not only new ones."""

    async def scenario() -> None:
        dispatcher = Dispatcher(_config(["a"], backend_overrides={"max_concurrency": 1}))
        queue = dispatcher.queues[0]
        seqs = {name: queue.enqueue(_tenant_request(i, name[0]), 50) for i, name in enumerate(["a1", "a2", "a3", "b1"])}
        assert seqs["a1"].running and dispatcher.tenant_room("b") is None  # first come, first served
        tenants = {"a": {"api_keys": ["ka"], "weight": 1, "priority": 1}, "b": {"api_keys": ["kb"], "weight": 4}}
        await dispatcher.reconfigure(_config(["a"], backend_overrides={"max_concurrency": 1}, tenants=tenants))
        assert dispatcher.queues[0] is queue  # the same queue, now sharing
        assert queue.places is not None and queue.places.waiting == {"a": 2, "b": 1}
        assert queue.places.held == {"a": 3, "b": 1}
        assert dispatcher.tenant_room("b") == dispatcher.capacity() * 4 // 5 - 1
        queue.withdraw(seqs["a1"])
        assert seqs["b1"].running and not seqs["a2"].running  # band 0 before band 1: the reload's bands rule
        tenants["b"]["weight"] = 1
        await dispatcher.reconfigure(_config(["a"], backend_overrides={"max_concurrency": 1}, tenants=tenants))
        assert dispatcher.tenant_room("b") == dispatcher.capacity() // 2 - 1  # new weights, same queue
        await dispatcher.reconfigure(_config(["a"], backend_overrides={"max_concurrency": 1}))
        assert queue.places is None and queue.engine.fair_share is None and dispatcher.tenant_room("b") is None

    asyncio.run(scenario())


def test_tenant_priorities_reach_the_stacks_job_admission_at_start_and_on_reload() -> None:
    """A tenant's ``priority`` is its band for the engines and, through the shared builder, for the stack's
    job-level admission (``policies/job/bands.py``); a reload that drops the bands drops them there too."""

    def config(tenants: dict[str, Any] | None) -> GatewayConfig:
        extra = {"tenants": tenants} if tenants else {}
        backends = [{"name": "a", "url": "http://127.0.0.1:9", "max_concurrency": 2, "model": "Llama-3-8B"}]
        policies = {"stack": "slosched", "stack_params": {"backlog": True, "tenant_bands": True}}
        return parse_config({"backends": backends, "policies": policies, **extra})

    # Fair sharing is on once a tenant has a weight; its priority is then its band.
    tenants = {
        "gold": {"api_keys": ["kg"], "weight": 1, "priority": 0},
        "bronze": {"api_keys": ["kb"], "weight": 1, "priority": 2},
    }

    async def scenario() -> None:
        dispatcher = Dispatcher(config(tenants))
        job_policy = dispatcher._slots.job_policy
        assert isinstance(job_policy, CriticalPathBudget) and job_policy.band_of is not None
        assert job_policy.band_of("bronze") == 2.0 and job_policy.band_of("gold") == 0.0
        await dispatcher.reconfigure(config(None))
        assert dispatcher._slots.job_policy is job_policy and job_policy.band_of is None
        await dispatcher.reconfigure(config(tenants))
        assert job_policy.band_of is not None and job_policy.band_of("bronze") == 2.0

    asyncio.run(scenario())


def test_the_policies_output_predictor_is_the_one_the_gateway_learns_with() -> None:
    async def scenario() -> None:
        backends = [{"name": "a", "url": "http://127.0.0.1:9", "max_concurrency": 2, "model": "Llama-3-8B"}]
        bucket = Dispatcher(parse_config({"backends": backends, "policies": {"output_predictor": "bucket"}}))
        assert bucket.context.output_predictor.mode == "bucket"
        assert Dispatcher(_config(["a"])).context.output_predictor.mode == "mean"

    asyncio.run(scenario())
