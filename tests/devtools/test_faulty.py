"""``devtools.faulty``: each fault mode misbehaves as documented while /health keeps answering ok."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx
import pytest

from slosched.devtools.faulty import CONTROL_PATH, FaultyBackend
from slosched.devtools.stub import serve_app

BODY = {"model": "tiny", "prompt": "hi", "max_tokens": 3}


Check = Callable[[FaultyBackend, httpx.AsyncClient], Awaitable[None]]


def run(check: Check) -> None:
    """Serve a fresh faulty backend in this event loop and run ``check`` against it."""

    async def main() -> None:
        backend = FaultyBackend()
        async with serve_app(backend.app()) as url, httpx.AsyncClient(base_url=url, timeout=5.0) as client:
            await check(backend, client)

    asyncio.run(main())


def test_none_mode_answers_like_the_stub_and_health_stays_ok() -> None:
    async def check(backend: FaultyBackend, client: httpx.AsyncClient) -> None:
        reply = await client.post("/v1/completions", json=BODY)
        assert reply.status_code == 200 and reply.json()["choices"][0]["text"] == "x " * 3
        stream = await client.post("/v1/chat/completions", json={**BODY, "messages": [], "stream": True})
        assert stream.text.endswith("data: [DONE]\n\n")
        too_long = await client.post("/v1/completions", json={**BODY, "max_tokens": 10**12})
        assert too_long.status_code == 400 and "2048" in too_long.json()["error"]["message"]
        assert (await client.get("/health")).status_code == 200
        assert "vllm:num_requests_running" in (await client.get("/metrics")).text
        assert (await client.get(CONTROL_PATH)).json() == {"mode": "none", "delay_s": 1.0, "calls": 3}

    run(check)


def test_error_invalid_and_reset_modes() -> None:
    async def check(backend: FaultyBackend, client: httpx.AsyncClient) -> None:
        await client.post(CONTROL_PATH, json={"mode": "error500"})
        reply = await client.post("/v1/completions", json=BODY)
        assert reply.status_code == 500 and reply.json()["error"]["message"] == "injected failure"
        await client.post(CONTROL_PATH, json={"mode": "invalid"})
        reply = await client.post("/v1/completions", json=BODY)
        assert reply.status_code == 200
        with pytest.raises(ValueError):
            reply.json()
        await client.post(CONTROL_PATH, json={"mode": "reset"})
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post("/v1/completions", json=BODY)
        assert (await client.get("/health")).status_code == 200

    run(check)


def test_hang_and_slow_modes_delay_calls_but_not_health() -> None:
    async def check(backend: FaultyBackend, client: httpx.AsyncClient) -> None:
        await client.post(CONTROL_PATH, json={"mode": "hang"})
        with pytest.raises(httpx.ReadTimeout):
            await client.post("/v1/completions", json=BODY, timeout=0.3)
        started = time.perf_counter()
        assert (await client.get("/health")).status_code == 200
        assert time.perf_counter() - started < 0.3
        await client.post(CONTROL_PATH, json={"mode": "slow_first_byte", "delay_s": 0.3})
        started = time.perf_counter()
        assert (await client.post("/v1/completions", json=BODY)).status_code == 200
        assert time.perf_counter() - started >= 0.3
        await client.post(CONTROL_PATH, json={"mode": "slow_stream", "delay_s": 0.1})
        started = time.perf_counter()
        reply = await client.post("/v1/completions", json={**BODY, "stream": True})
        assert reply.text.count("data: ") == 4 and time.perf_counter() - started >= 0.3

    run(check)


def test_control_rejects_unknown_modes_and_bad_delays() -> None:
    async def check(backend: FaultyBackend, client: httpx.AsyncClient) -> None:
        reply = await client.post(CONTROL_PATH, json={"mode": "explode"})
        assert reply.status_code == 400 and "error500" in reply.json()["error"]["message"]
        assert (await client.post(CONTROL_PATH, json={"mode": "hang", "delay_s": -1})).status_code == 400
        assert (await client.post(CONTROL_PATH, content=b"[1]")).status_code == 400
        assert backend.fault.mode == "none"

    run(check)
