"""``devtools.faulty``: each fault mode misbehaves as documented while /health keeps answering ok."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx
import pytest

from slosched.devtools.faulty import CONTROL_PATH, INVALID_BODY, Fault, FaultyBackend
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
        state = {"mode": "none", "delay_s": 1.0, "faults": [], "calls": 3, "disconnected": 0}
        assert (await client.get(CONTROL_PATH)).json() == state

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
        bad_sequence = await client.post(CONTROL_PATH, json={"mode": "hang", "faults": ["error500", "explode"]})
        assert bad_sequence.status_code == 400 and "faults[1]" in bad_sequence.json()["error"]["message"]
        assert (await client.post(CONTROL_PATH, json={"faults": "hang"})).status_code == 400
        assert backend.fault.mode == "none" and backend.fault.faults == []  # a refused change changes nothing

    run(check)
    with pytest.raises(ValueError, match="mode"):
        Fault("explode")


def test_a_per_call_sequence_of_faults_comes_before_the_mode() -> None:
    async def check(backend: FaultyBackend, client: httpx.AsyncClient) -> None:
        await client.post(CONTROL_PATH, json={"mode": "invalid", "faults": ["error500", "none"]})
        assert (await client.post("/v1/completions", json=BODY)).status_code == 500
        assert (await client.post("/v1/completions", json=BODY)).json()["id"] == "faulty"
        assert (await client.post("/v1/completions", json=BODY)).content == INVALID_BODY  # the mode, from now on
        state = (await client.get(CONTROL_PATH)).json()
        assert state["faults"] == [] and state["mode"] == "invalid" and state["calls"] == 3

    run(check)


def test_break_cuts_a_stream_after_one_event_and_a_plain_call_like_reset() -> None:
    async def check(backend: FaultyBackend, client: httpx.AsyncClient) -> None:
        backend.fault.set("break")
        events: list[str] = []
        with pytest.raises(httpx.RemoteProtocolError):
            async with client.stream("POST", "/v1/completions", json={**BODY, "stream": True}) as reply:
                assert reply.status_code == 200
                async for line in reply.aiter_lines():
                    events += [line] if line.startswith("data: ") else []
        assert len(events) == 1 and "[DONE]" not in events[0]
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post("/v1/completions", json=BODY)

    run(check)


def test_a_client_leaving_a_held_call_is_counted() -> None:
    async def check(backend: FaultyBackend, client: httpx.AsyncClient) -> None:
        for mode in ("hang", "slow_first_byte"):
            backend.fault.set(mode, 5.0)
            with pytest.raises(httpx.ReadTimeout):
                await client.post("/v1/completions", json=BODY, timeout=0.2)
        async with asyncio.timeout(3):
            while backend.disconnected < 2:
                await asyncio.sleep(0.01)
        assert backend.calls == 2

    run(check)
