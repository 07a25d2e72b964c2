"""Issue 25: after a full outage, backends rejoin as soon as their health check sees them back (not when an
ejection timer or a lucky probe call says so)."""

from __future__ import annotations

import asyncio

import httpx

from tests.gateway.faulty_backend import faulty_harness

CALL = {"prompt": "hello", "max_tokens": 2}
LONG_EJECTION = {"consecutive_failures": 1, "base_s": 60.0, "max_s": 120.0}


def test_a_burst_flows_within_a_second_of_the_backends_coming_back() -> None:
    async def scenario() -> None:
        harness = faulty_harness(["down", "down"], ejection=LONG_EJECTION, max_attempts=2)
        async with harness as h, httpx.AsyncClient(base_url=h.url, timeout=10) as client:
            await asyncio.sleep(0.6)  # health checks see the outage
            for _ in range(4):
                assert (await client.post("/v1/completions", json=CALL)).status_code in (502, 503)
            assert all(backend.outlier.ejected for backend in h.gateway.dispatcher.backends)
            for backend in h.backends:
                backend.fault.set("slow_first_byte", 0.1)  # the first calls back take a while
            await asyncio.sleep(1.2)
            replies = await asyncio.gather(*(client.post("/v1/completions", json=CALL) for _ in range(30)))
            assert [r.status_code for r in replies] == [200] * 30
            await h.settle()

    asyncio.run(scenario())
