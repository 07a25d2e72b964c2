"""Every registered router and engine preset runs on the gateway's views and queues unchanged."""

from __future__ import annotations

import asyncio
import math

import pytest

from slosched.core.request import Request
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.engine.base import ENGINE_PRESETS
from slosched.serve.config import parse_config
from slosched.serve.dispatcher import Dispatcher

# Parameters without defaults (SABER's speed model, a fixed cap); hardware-aware policies need a GPU and
# model the hardware tables know, so the backends here claim one.
_ENGINE_PARAMS = {
    "saber": {"speed": {"kind": "usl", "lam": 87.0, "sigma": 0.02, "kappa": 0.0001}},
    "static-concurrency": {"cap": 2},
}


def _dispatcher(router: str = "round-robin", engine: str = "chunked-fcfs") -> Dispatcher:
    backends = [
        {"name": f"b{i}", "url": f"http://127.0.0.1:{9 + i}", "max_concurrency": 2, "gpu": "A100-80G",
         "model": "Llama-3-8B"}
        for i in range(3)
    ]  # fmt: skip
    policies = {"router": router, "engine": engine, "engine_params": _ENGINE_PARAMS.get(engine, {})}
    return Dispatcher(parse_config({"backends": backends, "policies": policies}))


def _request(index: int, now: float, deadline_s: float = math.inf) -> Request:
    return Request(id=f"r{index}", job_id=f"j{index}", stage="s", template="t", prompt_tokens=50 + 10 * index,
                   max_output_tokens=64, arrival_s=now, job_arrival_s=now, deadline_s=deadline_s,
                   predicted_output_tokens=32.0)  # fmt: skip


@pytest.mark.parametrize("router", ROUTERS.names())
def test_every_router_routes_over_backend_views(router: str) -> None:
    dispatcher = _dispatcher(router=router)
    for index in range(6):
        queue = dispatcher.choose(_request(index, dispatcher.clock()), set())
        assert 0 <= queue.index < 3
    assert dispatcher.choose(_request(9, 0.0), {0, 1}).index == 2  # excluded backends are never picked


@pytest.mark.parametrize("engine", ENGINE_PRESETS.names())
def test_every_engine_preset_orders_and_admits_on_gateway_queues(engine: str) -> None:
    async def scenario() -> None:
        dispatcher = _dispatcher(engine=engine)
        queue = dispatcher.queues[0]
        now = dispatcher.clock()
        seqs = [queue.enqueue(_request(i, now, now + 5.0 + i), 50) for i in range(5)]
        assert queue.num_running <= queue.window == 2
        admitted = 0
        for _ in range(20):  # finish running requests one by one: everything is eventually admitted
            await asyncio.sleep(0.01)
            queue.pump()
            running = list(queue.running_seqs)
            admitted += len(running)
            for seq in running:
                queue.withdraw(seq)
            if not queue.waiting and not queue.num_running:
                break
        assert admitted == 5 and all(seq.admitted.done() for seq in seqs)
        assert queue.waiting_prefill_tokens == 0

    asyncio.run(scenario())
