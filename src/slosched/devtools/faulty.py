"""A fake vLLM server with switchable faults, for ``slosched bench chaos`` and the gateway's failure tests.

It answers the stub's routes (``/v1/completions``, ``/v1/chat/completions``, ``/v1/models``, ``/metrics``,
``/health``) exactly as ``devtools.stub`` does while its mode is ``none``; in a fault mode every generation
call misbehaves while ``/health`` and ``/metrics`` keep saying all is well (the failure a health check
cannot see). Like vLLM (and unlike the stub) it refuses ``max_tokens`` above ``max_model_len`` with a 400,
so fuzzed calls cannot make it build gigabyte answers. Modes (``FAULT_MODES``):

- ``error500``: every call answers 500 with a vLLM-style error body;
- ``hang``: every call waits forever (until the client leaves) before sending anything;
- ``invalid``: every call answers 200 with a body that is not a completion (truncated JSON);
- ``reset``: every call starts a 200 response, sends a fragment and drops the connection;
- ``slow_stream``: streamed calls send one event every ``delay_s``; plain calls wait ``delay_s`` per token;
- ``slow_first_byte``: every call waits ``delay_s`` before its first byte, then answers normally.

The mode is switched at run time with ``POST /_fault {"mode": M, "delay_s": S}`` (``GET /_fault`` reads it
and the number of generation calls seen), so one running process serves a whole chaos run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from slosched.devtools.stub import StubBackend, StubBehaviour

FAULT_MODES = ("none", "error500", "hang", "invalid", "reset", "slow_stream", "slow_first_byte")
CONTROL_PATH = "/_fault"
_HANG_S = 24 * 3600.0  # "forever": the client (the gateway) gives up long before


class FaultyBackendCutError(Exception):
    """Raised inside a started response to make the server drop the connection mid-body."""


@dataclass(slots=True)
class Fault:
    """The current fault: ``mode`` (one of ``FAULT_MODES``) and ``delay_s`` for the slow modes."""

    mode: str = "none"
    delay_s: float = 1.0

    def set(self, mode: str, delay_s: float | None) -> None:
        if mode not in FAULT_MODES:
            raise ValueError(f"mode: expected one of {list(FAULT_MODES)}, got {mode!r}")
        if delay_s is not None and not (isinstance(delay_s, int | float) and 0 <= delay_s <= 3600):
            raise ValueError(f"delay_s: expected seconds in [0, 3600], got {delay_s!r}")
        self.mode = mode
        if delay_s is not None:
            self.delay_s = float(delay_s)


@dataclass(slots=True)
class FaultyBackend:
    """A stub whose generation routes fail as ``fault`` says; ``calls`` counts generation calls seen."""

    name: str = "faulty"
    fault: Fault = field(default_factory=Fault)
    stub: StubBackend = field(default_factory=lambda: StubBackend(name="faulty"))
    calls: int = 0
    max_model_len: int = 2048

    def app(self) -> Starlette:
        stub = self.stub
        return Starlette(
            routes=[
                Route("/v1/completions", self._generate, methods=["POST"]),
                Route("/v1/chat/completions", self._generate, methods=["POST"]),
                Route("/metrics", stub._metrics, methods=["GET"]),
                Route("/health", stub._health, methods=["GET"]),
                Route("/v1/models", stub._models, methods=["GET"]),
                Route(CONTROL_PATH, self._control, methods=["GET", "POST"]),
            ]
        )

    async def _control(self, request: Request) -> Response:
        if request.method == "POST":
            try:
                body = json.loads(await request.body())
                if not isinstance(body, dict):
                    raise ValueError("body: expected a JSON object")
                self.fault.set(str(body.get("mode", "none")), body.get("delay_s"))
            except ValueError as error:  # JSONDecodeError is a ValueError
                return JSONResponse({"error": {"message": str(error)[:200]}}, status_code=400)
        return JSONResponse({"mode": self.fault.mode, "delay_s": self.fault.delay_s, "calls": self.calls})

    async def _generate(self, request: Request) -> Response:
        self.calls += 1
        mode, delay_s = self.fault.mode, self.fault.delay_s
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error(400, "BadRequestError", "invalid JSON body")
        max_tokens = body.get("max_tokens") if isinstance(body, dict) else None
        if not isinstance(max_tokens, int | None) or (max_tokens or 0) > self.max_model_len:
            # vLLM refuses what cannot fit its context; the stub would try to build the whole answer
            return _error(400, "BadRequestError", f"max_tokens must be at most {self.max_model_len}")
        if mode == "none":
            return await self.stub._generate(_replay(request, body))
        if mode == "error500":
            return _error(500, "InternalServerError", "injected failure")
        if mode == "hang":
            await asyncio.sleep(_HANG_S)
        if mode == "invalid":
            return Response(b'{"id": "faulty", "choices": [{"text": ', media_type="application/json")
        if mode == "reset":
            return StreamingResponse(_cut(), media_type="application/json", headers={"content-length": "4096"})
        if mode == "slow_first_byte":
            await asyncio.sleep(delay_s)
            return await self.stub._generate(_replay(request, body))
        return await self._slow(request, body, delay_s)

    async def _slow(self, request: Request, body: dict[str, object], delay_s: float) -> Response:
        """``slow_stream``: the stub's answer with ``delay_s`` between tokens."""
        stub = StubBackend(name=self.name, behaviour=StubBehaviour(token_delay_s=delay_s))
        return await stub._generate(_replay(request, body))


def _error(status: int, kind: str, message: str) -> Response:
    """vLLM's error body (OpenAI's shape)."""
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


async def _cut() -> AsyncIterator[bytes]:
    yield b'{"id": "faulty", "choices": ['
    raise FaultyBackendCutError("faulty backend dropped the connection")


def _replay(request: Request, body: dict[str, object]) -> Request:
    """A request whose body (already read) can be read again by the stub's handler."""
    data = json.dumps(body).encode()

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": data, "more_body": False}

    return Request(request.scope, receive)


def main(argv: list[str] | None = None) -> None:
    """``python -m slosched.devtools.faulty --port P [--fault MODE] [--delay S]``: a standalone server."""
    import argparse

    parser = argparse.ArgumentParser(description="fake vLLM OpenAI server with switchable faults")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fault", choices=FAULT_MODES, default="none")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds, for the slow modes")
    args = parser.parse_args(argv)
    backend = FaultyBackend(fault=Fault(args.fault, args.delay))
    uvicorn.run(backend.app(), host="127.0.0.1", port=args.port, log_level="critical", access_log=False)


if __name__ == "__main__":
    main()
