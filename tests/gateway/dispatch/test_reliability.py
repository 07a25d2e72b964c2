"""Faults against stub backends: every accepted request ends in exactly one terminal state, no hangs."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx

from slosched.devtools.stub import StubBackend, serve_app
from slosched.gateway.http.app import Gateway
from slosched.gateway.ops.config import parse_config
from tests.gateway.helpers import Harness, harness, stub_config

STREAM = {"prompt": "p", "max_tokens": 10, "stream": True}


def _balanced(h: Harness) -> None:
    accepted = h.value("slosched:requests_accepted_total")
    assert accepted > 0
    assert h.terminal_total() == accepted, h.outcomes()
    for queue in h.gateway.dispatcher.queues:
        assert queue.num_running == 0 and not queue.waiting


def test_backend_breaking_mid_stream_fails_the_call_once() -> None:
    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            for stub in h.stubs:
                stub.behaviour.break_after_tokens = 3
            async with client.stream("POST", "/v1/completions", json=STREAM) as response:
                assert response.status_code == 200  # headers were sent before the break: no retry possible
                text = (await response.aread()).decode()
            assert "backend failed mid-stream" in text
            assert sum(len(stub.received) for stub in h.stubs) == 1  # not retried after the first byte
            await asyncio.sleep(0.05)
            assert h.value("slosched:requests_total", outcome="failed", reason="backend_stream_broken") == 1
            _balanced(h)

    asyncio.run(scenario())


def test_killed_backend_is_skipped_retried_and_rejoins_after_restart() -> None:
    async def scenario() -> None:
        stubs = [StubBackend(name="s0"), StubBackend(name="s1")]
        async with contextlib.AsyncExitStack() as stack:
            first = contextlib.AsyncExitStack()
            urls = [await first.enter_async_context(serve_app(stubs[0].app()))]
            urls.append(await stack.enter_async_context(serve_app(stubs[1].app())))
            first_port = int(urls[0].rsplit(":", 1)[1])
            gateway = Gateway(parse_config(stub_config(urls, policies={"router": "round-robin"})))
            url = await stack.enter_async_context(serve_app(gateway.app, lifespan="on"))
            h = Harness(url, gateway, stubs, urls)
            client = await stack.enter_async_context(httpx.AsyncClient(base_url=url))
            await first.aclose()  # kill backend 0
            results = [await client.post("/v1/completions", json={"prompt": "p", "max_tokens": 2}) for _ in range(6)]
            assert all(r.status_code == 200 for r in results)  # retried on backend 1 before any byte
            assert not gateway.dispatcher.backends[0].healthy
            assert len(stubs[1].received) == 6
            async with serve_app(stubs[0].app(), first_port):  # restart on the same port
                for _ in range(100):
                    if gateway.dispatcher.backends[0].healthy:
                        break
                    await asyncio.sleep(0.05)
                assert gateway.dispatcher.backends[0].healthy
                for _ in range(4):
                    assert (
                        await client.post("/v1/completions", json={"prompt": "q", "max_tokens": 2})
                    ).status_code == 200
                assert len(stubs[0].received) >= 1
            _balanced(h)

    asyncio.run(scenario())


def test_slow_backend_first_byte_timeout_retries_elsewhere() -> None:
    async def scenario() -> None:
        timeouts = {"queue_s": 5.0, "first_byte_s": 0.3, "read_s": 5.0}
        async with harness(timeouts=timeouts, policies={"router": "round-robin"}) as h:
            h.stubs[0].behaviour.first_byte_delay_s = 2.0
            async with httpx.AsyncClient(base_url=h.url) as client:
                responses = await asyncio.gather(*(client.post("/v1/completions", json=STREAM) for _ in range(4)))
            assert all(r.status_code == 200 for r in responses)
            assert h.value("slosched:retries_total") >= 1
            # Both slow: bounded attempts, then a 502 with Retry-After; nothing hangs.
            h.stubs[1].behaviour.first_byte_delay_s = 2.0
            async with httpx.AsyncClient(base_url=h.url) as client:
                response = await client.post("/v1/completions", json=STREAM)
            assert response.status_code == 502 and "retry-after" in response.headers
            await asyncio.sleep(0.05)
            _balanced(h)

    asyncio.run(scenario())


def test_overload_gets_429_with_retry_after_and_no_request_is_lost() -> None:
    async def scenario() -> None:
        async with harness(num_stubs=1, backend={"max_concurrency": 1, "max_queue": 2}) as h:
            h.stubs[0].behaviour.token_delay_s = 0.02
            async with httpx.AsyncClient(base_url=h.url) as client:
                body = {"prompt": "p", "max_tokens": 5}
                responses = await asyncio.gather(*(client.post("/v1/completions", json=body) for _ in range(10)))
            codes = sorted(r.status_code for r in responses)
            assert codes.count(200) >= 3 and codes.count(429) >= 1 and set(codes) <= {200, 429}
            assert all("retry-after" in r.headers for r in responses if r.status_code == 429)
            assert h.value("slosched:admission_rejections_total", reason="queue_full") == codes.count(429)
            _balanced(h)

    asyncio.run(scenario())


def test_no_healthy_backend_is_503_and_queue_timeout_is_503() -> None:
    async def scenario() -> None:
        overrides = {"backend": {"max_concurrency": 1}, "timeouts": {"queue_s": 0.2, "first_byte_s": 5.0}}
        async with harness(num_stubs=1, **overrides) as h, httpx.AsyncClient(base_url=h.url) as client:
            h.stubs[0].behaviour.token_delay_s = 0.1
            slow = asyncio.create_task(client.post("/v1/completions", json={"prompt": "p", "max_tokens": 5}))
            await asyncio.sleep(0.05)
            queued = await client.post("/v1/completions", json={"prompt": "p", "max_tokens": 1})
            assert queued.status_code == 503 and queued.json()["error"]["type"] == "queue_timeout"
            assert (await slow).status_code == 200
            h.gateway.dispatcher.backends[0].mark_down("test")
            h.gateway.dispatcher.backends[0].down_since_s = float("inf")  # not yet due for a retry
            response = await client.post("/v1/completions", json={"prompt": "p"})
            assert response.status_code in (200, 503)  # the health loop may already have revived it
            if response.status_code == 503:
                assert response.headers["retry-after"] == "1"
            _balanced(h)

    asyncio.run(scenario())


def test_client_disconnect_mid_stream_cancels_and_frees_the_slot() -> None:
    async def scenario() -> None:
        async with harness(num_stubs=1) as h, httpx.AsyncClient(base_url=h.url) as client:
            h.stubs[0].behaviour.token_delay_s = 0.05
            async with client.stream("POST", "/v1/completions", json={**STREAM, "max_tokens": 100}) as response:
                async for _ in response.aiter_raw():
                    break  # leave after the first chunk
            for _ in range(100):
                if h.terminal_total() == 1:
                    break
                await asyncio.sleep(0.02)
            assert h.value("slosched:requests_total", outcome="cancelled", reason="client_disconnected") == 1
            _balanced(h)

    asyncio.run(scenario())


def test_api_keys_and_tenant_rate_limits() -> None:
    async def scenario() -> None:
        overrides: dict[str, Any] = {
            "api_keys": ["secret"],
            "tenant_rate_limits": {"small": 1.0},
            "trust_tenant_header": True,
        }
        async with harness(**overrides) as h, httpx.AsyncClient(base_url=h.url) as client:
            body = {"prompt": "p", "max_tokens": 1}
            assert (await client.post("/v1/completions", json=body)).status_code == 401
            assert (
                await client.post("/v1/completions", json=body, headers={"authorization": "Bearer no"})
            ).status_code == 401
            auth = {"authorization": "Bearer secret", "x-tenant": "small"}
            assert (await client.post("/v1/completions", json=body, headers=auth)).status_code == 200
            limited = await client.post("/v1/completions", json=body, headers=auth)
            assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
            other = {"x-api-key": "secret", "x-tenant": "big"}
            assert (await client.post("/v1/completions", json=body, headers=other)).status_code == 200

    asyncio.run(scenario())
