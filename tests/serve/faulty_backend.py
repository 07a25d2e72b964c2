"""A fault-injecting fake vLLM backend (raw ASGI, so it can hang, reset and break at will) and a harness of
these behind a real gateway, for the ejection, disconnect and terminal-state tests.

Modes (``mode``, or one per call from ``faults``): ``ok``; ``error`` (HTTP 500); ``hang`` (never answers,
until the gateway closes the connection); ``invalid`` (200 with a body that is not JSON); ``reset`` (headers,
then the connection is dropped mid-body); ``break`` (a stream cut after one event; a non-streamed call is
then a reset); ``slow`` (answers after ``delay_s``). ``/health`` always says OK: only calls see the faults.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from slosched.devtools.stub import serve_app
from slosched.serve.app import Gateway
from slosched.serve.config import parse_config
from slosched.serve.metrics import counter_value
from tests.serve.helpers import stub_config

Message = MutableMapping[str, Any]
MODES = ("ok", "error", "hang", "invalid", "reset", "break", "slow")


class _Reset(Exception):
    """Raised after the response started: uvicorn drops the connection."""


@dataclass
class FaultyBackend:
    name: str
    mode: str = "ok"
    faults: list[str] = field(default_factory=list)
    delay_s: float = 0.2
    calls: int = 0
    active: int = 0
    disconnected: int = 0  # calls whose connection the gateway closed while the backend still worked

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] in ("/health", "/metrics"):
            await _answer(send, 200, b"ok", b"text/plain")
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        body = json.loads(raw)
        self.calls += 1
        mode = self.faults.pop(0) if self.faults else self.mode
        self.active += 1
        try:
            await self._serve(mode, body, receive, send)
        finally:
            self.active -= 1

    async def _serve(self, mode: str, body: dict[str, Any], receive: Any, send: Any) -> None:
        stream = bool(body.get("stream"))
        if mode == "error":
            await _answer(send, 500, b'{"error": {"message": "boom"}}')
        elif mode in ("hang", "slow"):
            if await self._wait_or_disconnect(receive, 3600.0 if mode == "hang" else self.delay_s):
                return
            await self._ok(stream, send)
        elif mode == "invalid":
            await _answer(send, 200, b"<html>not json</html>")
        elif mode == "reset" or (mode == "break" and not stream):
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-length", b"100"), (b"content-type", b"application/json")]})  # fmt: skip
            await send({"type": "http.response.body", "body": b'{"choi', "more_body": True})
            raise _Reset
        elif mode == "break":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})  # fmt: skip
            await send({"type": "http.response.body", "body": _event(), "more_body": True})
            raise _Reset
        else:
            await self._ok(stream, send)

    async def _wait_or_disconnect(self, receive: Any, wait_s: float) -> bool:
        try:
            async with asyncio.timeout(wait_s):
                while (await receive())["type"] != "http.disconnect":
                    pass
        except TimeoutError:
            return False
        self.disconnected += 1
        return True

    async def _ok(self, stream: bool, send: Any) -> None:
        if not stream:
            usage = {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}
            payload = {"id": self.name, "choices": [{"index": 0, "text": "x x"}], "usage": usage}
            await _answer(send, 200, json.dumps(payload).encode())
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": _event() + _event(), "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


def _event() -> bytes:
    return b'data: {"choices": [{"index": 0, "text": "x "}]}\n\n'


async def _answer(send: Any, status: int, body: bytes, media: bytes = b"application/json") -> None:
    headers = [(b"content-type", media), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@dataclass
class FaultyHarness:
    url: str
    gateway: Gateway
    backends: list[FaultyBackend]

    def value(self, name: str, **labels: str) -> float:
        return counter_value(self.gateway.dispatcher.metrics, name, tuple(labels.items()))

    def outcomes(self) -> dict[str, float]:
        result: dict[str, float] = {}
        for family in self.gateway.dispatcher.metrics.registry.collect():
            for sample in family.samples:
                if sample.name == "slosched_requests_total" and sample.value:
                    key = f"{sample.labels['outcome']}/{sample.labels['reason']}"
                    result[key] = result.get(key, 0.0) + sample.value
        return result

    def idle(self) -> bool:
        return all(not q.waiting and q.num_running == 0 for q in self.gateway.dispatcher.queues)

    async def settle(self, timeout_s: float = 10.0) -> None:
        """Wait until every accepted call has its terminal outcome and the queues are empty."""
        async with asyncio.timeout(timeout_s):
            while not (self.idle() and sum(self.outcomes().values()) == self.value("slosched_requests_accepted_total")):
                await asyncio.sleep(0.01)


# Quick failure detection for tests: hung calls are abandoned after ~0.3 s, ejections last 0.5 s.
FAST = {
    "timeouts": {"queue_s": 5.0, "first_byte_s": 30.0, "first_byte_min_s": 0.3, "first_byte_factor": 1.0,
                 "read_s": 2.0, "connect_s": 1.0, "health_s": 1.0},
    "ejection": {"consecutive_failures": 3, "base_s": 0.5, "max_s": 4.0},
}  # fmt: skip


@contextlib.asynccontextmanager
async def faulty_harness(
    modes: list[str], models: list[str] | None = None, **overrides: Any
) -> AsyncIterator[FaultyHarness]:
    """Faulty backends (``models``: each one's served model, default all "tiny") behind a gateway."""
    backends = [FaultyBackend(name=f"f{index}", mode=mode) for index, mode in enumerate(modes)]
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(serve_app(backend)) for backend in backends]
        config = stub_config(urls, **{**FAST, **overrides})
        for entry, model in zip(config["backends"], models or [], strict=False):
            entry["model"] = model
        gateway = Gateway(parse_config(config))
        url = await stack.enter_async_context(serve_app(gateway.app, lifespan="on"))
        yield FaultyHarness(url, gateway, backends)
