"""A fake vLLM server with switchable faults: the one fault-injecting backend, for ``slosched bench chaos``
(run as a process) and the gateway's failure tests (served in-process with ``devtools.stub.serve_app``).

It answers the stub's routes (``/v1/completions``, ``/v1/chat/completions``, ``/v1/messages``,
``/v1/responses``, ``/v1/models``, ``/metrics``, ``/health``) exactly as ``devtools.stub`` does while its mode
is ``none``; in a fault mode every generation call misbehaves while ``/health`` and ``/metrics`` keep saying all
is well (the failure a health check cannot see). Like vLLM (and unlike the stub) it refuses ``max_tokens`` above
``max_model_len`` with a 400, so fuzzed calls cannot make it build gigabyte answers. Modes (``FAULT_MODES``):

- ``error500``: the call answers 500 with a vLLM-style error body;
- ``hang``: the call sends nothing until the client leaves;
- ``invalid``: the call answers 200 with a body that is not a completion (``INVALID_BODY``, truncated JSON);
- ``down``: an outage: ``/health`` answers 503 and every call is reset;
- ``reset``: the call starts a 200 response, sends a fragment and drops the connection;
- ``break``: a streamed call sends one event, then the connection is dropped (a plain call: ``reset``);
- ``slow_stream``: streamed calls send one event every ``delay_s``; plain calls wait ``delay_s`` per token;
- ``slow_first_byte``: the call waits ``delay_s`` (or until the client leaves), then answers normally.

Each generation call takes the next mode of the per-call sequence ``faults``, or ``mode`` once that is
empty. The state is switched at run time with ``POST /_fault {"mode": M, "delay_s": S, "faults": [...]}``
(``GET /_fault`` reads it with the counts), so one running process serves a whole chaos run; in-process,
tests call ``Fault.set`` or set the fields. ``calls`` counts generation calls seen, ``disconnected`` those
whose client left while the backend was still holding them (a hang, a slow first byte).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from slosched.devtools import stub_responses
from slosched.devtools.stub import StubBackend, StubBehaviour

FAULT_MODES = ("none", "error500", "hang", "invalid", "reset", "break", "slow_stream", "slow_first_byte", "down")
CONTROL_PATH = "/_fault"
INVALID_BODY = b'{"id": "faulty", "choices": [{"text": '
MAX_DELAY_S = 3600.0
_HANG_S = 24 * 3600.0  # "forever": the client (the gateway) gives up long before


class FaultyBackendCutError(Exception):
    """Raised inside a started response to make the server drop the connection mid-body."""


def _check_mode(mode: object, name: str) -> str:
    if not isinstance(mode, str) or mode not in FAULT_MODES:
        raise ValueError(f"{name}: expected one of {list(FAULT_MODES)}, got {str(mode)[:64]!r}")
    return mode


@dataclass(slots=True)
class Fault:
    """The fault state: ``mode`` (one of ``FAULT_MODES``) for every call once the per-call sequence
    ``faults`` (first to last) is used up, and ``delay_s`` for the slow modes."""

    mode: str = "none"
    delay_s: float = 1.0
    faults: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.set(self.mode, self.delay_s, self.faults)  # a mistyped mode fails here, not as a silent "none"

    def set(self, mode: object, delay_s: object = None, faults: Sequence[object] = ()) -> None:
        """Replace ``mode`` and the sequence; ``delay_s`` only when given. ValueError (naming the field)
        on anything else, and then nothing changes."""
        checked = _check_mode(mode, "mode")
        if isinstance(faults, str | bytes) or not isinstance(faults, Sequence):
            raise ValueError(f"faults: expected a list of modes, got {str(faults)[:64]!r}")
        sequence = [_check_mode(each, f"faults[{index}]") for index, each in enumerate(faults)]
        valid_delay = isinstance(delay_s, int | float) and not isinstance(delay_s, bool) and 0 <= delay_s <= MAX_DELAY_S
        if delay_s is not None and not valid_delay:
            raise ValueError(f"delay_s: expected seconds in [0, {MAX_DELAY_S:.0f}], got {str(delay_s)[:64]!r}")
        self.mode, self.faults = checked, sequence
        if isinstance(delay_s, int | float):
            self.delay_s = float(delay_s)

    def next_mode(self) -> str:
        """The mode of the next call (consumes one entry of ``faults`` when there is one)."""
        return self.faults.pop(0) if self.faults else self.mode


@dataclass(slots=True)
class FaultyBackend:
    """A stub whose generation routes fail as ``fault`` says; serve ``app()``. Answers carry ``name`` as
    their ``id`` (tests tell backends apart by it)."""

    name: str = "faulty"
    fault: Fault = field(default_factory=Fault)
    max_model_len: int = 2048
    calls: int = 0
    disconnected: int = 0
    stub: StubBackend = field(init=False)

    def __post_init__(self) -> None:
        self.stub = StubBackend(name=self.name)

    def app(self) -> Starlette:
        stub = self.stub
        return Starlette(
            routes=[
                Route("/v1/completions", self._generate, methods=["POST"]),
                Route("/v1/chat/completions", self._generate, methods=["POST"]),
                Route("/v1/messages", self._generate, methods=["POST"]),
                Route("/v1/responses", self._generate, methods=["POST"]),
                Route("/metrics", stub._metrics, methods=["GET"]),
                Route("/health", self._health, methods=["GET"]),
                Route("/v1/models", stub._models, methods=["GET"]),
                Route(CONTROL_PATH, self._control, methods=["GET", "POST"]),
            ]
        )

    def state(self) -> dict[str, Any]:
        fault = self.fault
        return {
            "mode": fault.mode,
            "delay_s": fault.delay_s,
            "faults": list(fault.faults),
            "calls": self.calls,
            "disconnected": self.disconnected,
        }

    async def _health(self, request: Request) -> Response:
        if self.fault.mode == "down":
            return _error(503, "ServiceUnavailable", "down")
        return await self.stub._health(request)

    async def _control(self, request: Request) -> Response:
        if request.method == "POST":
            try:
                body = json.loads(await request.body())
                if not isinstance(body, dict):
                    raise ValueError("body: expected a JSON object with mode, delay_s, faults")
                self.fault.set(body.get("mode", "none"), body.get("delay_s"), body.get("faults", []))
            except ValueError as error:  # JSONDecodeError is a ValueError
                return JSONResponse({"error": {"message": str(error)[:200]}}, status_code=400)
        return JSONResponse(self.state())

    async def _generate(self, request: Request) -> Response:
        self.calls += 1
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error(400, "BadRequestError", "invalid JSON body")
        if not isinstance(body, dict):
            return _error(400, "BadRequestError", "body: expected a JSON object")
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int | None) or (max_tokens or 0) > self.max_model_len:
            # vLLM refuses what cannot fit its context; the stub would try to build the whole answer
            return _error(400, "BadRequestError", f"max_tokens must be at most {self.max_model_len}")
        return await self._misbehave(self.fault.next_mode(), self.fault.delay_s, request, body)

    async def _misbehave(self, mode: str, delay_s: float, request: Request, body: dict[str, Any]) -> Response:
        stream = bool(body.get("stream"))
        if mode == "error500":
            return _error(500, "InternalServerError", "injected failure")
        if mode == "invalid":
            return Response(INVALID_BODY, media_type="application/json")
        if mode in ("reset", "down") or (mode == "break" and not stream):
            return StreamingResponse(_cut(), media_type="application/json", headers={"content-length": "4096"})
        if mode == "break":
            return await self._variant(StubBehaviour(break_after_tokens=1), request, body)
        if mode == "slow_stream":
            return await self._variant(StubBehaviour(token_delay_s=delay_s), request, body)
        held_s = {"hang": _HANG_S, "slow_first_byte": delay_s}.get(mode)
        if held_s is not None and await self._wait_or_leave(request, held_s):
            return Response(status_code=204)  # the client is gone: this is never sent
        return await _answer(self.stub, _replay(request, body))

    async def _variant(self, behaviour: StubBehaviour, request: Request, body: dict[str, Any]) -> Response:
        """The stub's answer with ``behaviour`` (slower, or cut short) for this one call."""
        return await _answer(StubBackend(name=self.name, behaviour=behaviour), _replay(request, body))

    async def _wait_or_leave(self, request: Request, wait_s: float) -> bool:
        """Hold the call ``wait_s``; True (and counted in ``disconnected``) when its client left first."""
        try:
            async with asyncio.timeout(wait_s):
                while (await request.receive())["type"] != "http.disconnect":
                    pass
        except TimeoutError:
            return False
        self.disconnected += 1
        return True


async def _answer(stub: StubBackend, request: Request) -> Response:
    """The stub's answer in the route's shape: an Anthropic message, an OpenAI response or completion."""
    if request.url.path == "/v1/responses":
        return await stub_responses.create(stub, request)
    return await (stub._message if request.url.path == "/v1/messages" else stub._generate)(request)


def _error(status: int, kind: str, message: str) -> Response:
    """vLLM's error body (OpenAI's shape)."""
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


async def _cut() -> AsyncIterator[bytes]:
    yield b'{"id": "faulty", "choices": ['
    raise FaultyBackendCutError("faulty backend dropped the connection")


def _replay(request: Request, body: dict[str, Any]) -> Request:
    """A request whose body (already read) can be read again by the stub's handler."""
    data = json.dumps(body).encode()

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": data, "more_body": False}

    return Request(request.scope, receive)


def main(argv: list[str] | None = None) -> None:
    """``python -m slosched.devtools.faulty --port P [--fault MODE] [--delay S] [--faults M,M,...]``."""
    import argparse

    parser = argparse.ArgumentParser(description="fake vLLM OpenAI server with switchable faults")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fault", choices=FAULT_MODES, default="none", help="every call's mode")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds, for the slow modes")
    parser.add_argument("--faults", default="", help="comma-separated modes of the first calls, in order")
    args = parser.parse_args(argv)
    fault = Fault()
    try:
        fault.set(args.fault, args.delay, [mode for mode in args.faults.split(",") if mode])
    except ValueError as error:
        parser.error(str(error))
    backend = FaultyBackend(fault=fault)
    uvicorn.run(backend.app(), host="127.0.0.1", port=args.port, log_level="critical", access_log=False)


if __name__ == "__main__":
    main()
