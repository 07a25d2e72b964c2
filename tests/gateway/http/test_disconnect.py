"""A client that disconnects cancels its call's work wherever the call is: waiting on a (hanging) backend,
or queued at the gateway, streamed or not. The backend connection is closed (vLLM aborts the request), the
call ends ``cancelled/client_disconnected``, never completed, and its queue slot is freed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from tests.gateway.faulty_backend import FaultyHarness, faulty_harness

# Hung calls are not timed out here: only the client's leaving may end them.
PATIENT = {"queue_s": 30.0, "first_byte_s": 30.0, "first_byte_min_s": 30.0, "read_s": 30.0}


async def _leave_after(client: httpx.AsyncClient, body: dict[str, Any], delay_s: float) -> None:
    """Send a call and drop the connection after ``delay_s`` (cancelling an httpx request closes it)."""
    task = asyncio.create_task(client.post("/v1/completions", json=body))
    await asyncio.sleep(delay_s)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _until(h: FaultyHarness, key: str, count: float) -> None:
    async with asyncio.timeout(5):
        while h.outcomes().get(key, 0.0) < count:
            await asyncio.sleep(0.01)


def test_a_non_streamed_call_waiting_on_a_hung_backend_is_cancelled_and_the_backend_told() -> None:
    async def scenario() -> None:
        async with (
            faulty_harness(["hang"], timeouts=PATIENT) as h,
            httpx.AsyncClient(base_url=h.url, timeout=30) as client,
        ):
            await _leave_after(client, {"prompt": "p", "max_tokens": 4}, 0.3)
            await _until(h, "cancelled/client_disconnected", 1)
            async with asyncio.timeout(5):
                while h.backends[0].disconnected < 1:  # the upstream connection was closed
                    await asyncio.sleep(0.01)
            await h.settle()
            assert h.outcomes() == {"cancelled/client_disconnected": 1.0}

    asyncio.run(scenario())


def test_queued_calls_streamed_or_not_leave_the_queue_when_their_clients_leave() -> None:
    async def scenario() -> None:
        async with faulty_harness(["hang"], backend={"max_concurrency": 1, "max_queue": 8}, timeouts=PATIENT) as h:
            async with httpx.AsyncClient(base_url=h.url, timeout=30) as client:
                holder = asyncio.create_task(client.post("/v1/completions", json={"prompt": "p", "max_tokens": 4}))
                queue = h.gateway.dispatcher.queues[0]
                async with asyncio.timeout(5):
                    while queue.num_running < 1:
                        await asyncio.sleep(0.01)
                for stream in (True, False):
                    await _leave_after(client, {"prompt": "q", "max_tokens": 4, "stream": stream}, 0.3)
                await _until(h, "cancelled/client_disconnected", 2)
                assert not queue.waiting and queue.num_running == 1  # both queued calls gone, the holder runs
                assert h.backends[0].calls == 1  # the queued calls never reached the backend
                holder.cancel()
                await asyncio.gather(holder, return_exceptions=True)
            await h.settle()
            assert h.outcomes() == {"cancelled/client_disconnected": 3.0}

    asyncio.run(scenario())


def test_a_streamed_call_on_a_hung_backend_is_cancelled_too() -> None:
    async def scenario() -> None:
        async with (
            faulty_harness(["hang"], timeouts=PATIENT) as h,
            httpx.AsyncClient(base_url=h.url, timeout=30) as client,
        ):
            await _leave_after(client, {"prompt": "p", "max_tokens": 4, "stream": True}, 0.3)
            await _until(h, "cancelled/client_disconnected", 1)
            await h.settle()
            async with asyncio.timeout(5):
                while h.backends[0].disconnected < 1:
                    await asyncio.sleep(0.01)
            assert h.outcomes() == {"cancelled/client_disconnected": 1.0}

    asyncio.run(scenario())


async def _asgi_call(app: Any, body: dict[str, Any], leave: asyncio.Event) -> list[dict[str, Any]]:
    """One POST /v1/completions straight into the gateway's ASGI app; its client leaves when ``leave`` is set
    (``receive`` then reports ``http.disconnect``, as an ASGI server does for a dropped connection)."""
    sent: list[dict[str, Any]] = []
    first = True

    async def receive() -> dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}
        await leave.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/completions",
        "raw_path": b"/v1/completions",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }
    await app(scope, receive, send)
    return sent


def test_a_queued_call_whose_client_left_with_the_running_one_is_not_given_the_freed_slot() -> None:
    """The running and the queued client leave in the same instant: the slot the running call frees must not
    go to the queued call (its client is gone too), which would reach the backend and count as completed."""

    async def scenario() -> None:
        async with faulty_harness(["none"], backend={"max_concurrency": 1, "max_queue": 8}, timeouts=PATIENT) as h:
            h.backends[0].fault.set("none", faults=["hang"])  # the first call holds the slot, the next would run
            queue = h.gateway.dispatcher.queues[0]
            leave = asyncio.Event()
            running = asyncio.create_task(_asgi_call(h.gateway.app, {"prompt": "p", "max_tokens": 4}, leave))
            async with asyncio.timeout(5):
                while queue.num_running < 1:
                    await asyncio.sleep(0.01)
            queued = asyncio.create_task(_asgi_call(h.gateway.app, {"prompt": "q", "max_tokens": 4}, leave))
            async with asyncio.timeout(5):
                while len(queue.waiting) < 1:
                    await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)  # both disconnect watchers are listening
            leave.set()  # both clients leave at once
            async with asyncio.timeout(5):
                await asyncio.gather(running, queued)
            await h.settle()
            assert h.outcomes() == {"cancelled/client_disconnected": 2.0}
            assert h.backends[0].calls == 1  # the queued call never reached the backend

    asyncio.run(scenario())
