"""Every registered router and engine preset runs on the gateway's views and queues unchanged."""

from __future__ import annotations

import asyncio

import pytest

from slosched.policies.cluster.base import ROUTERS
from slosched.policies.engine.base import ENGINE_PRESETS
from tests.gateway.helpers import make_request, offline_dispatcher


@pytest.mark.parametrize("router", ROUTERS.names())
def test_every_router_routes_over_backend_views(router: str) -> None:
    dispatcher = offline_dispatcher(router=router)
    for index in range(6):
        queue = dispatcher.choose(make_request(index, dispatcher.clock()), set())
        assert 0 <= queue.index < 3
    assert dispatcher.choose(make_request(9, 0.0), {0, 1}).index == 2  # excluded backends are never picked


@pytest.mark.parametrize("engine", ENGINE_PRESETS.names())
def test_every_engine_preset_orders_and_admits_on_gateway_queues(engine: str) -> None:
    async def scenario() -> None:
        dispatcher = offline_dispatcher(engine=engine)
        queue = dispatcher.queues[0]
        now = dispatcher.clock()
        seqs = [queue.enqueue(make_request(i, now, now + 5.0 + i), 50) for i in range(5)]
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
