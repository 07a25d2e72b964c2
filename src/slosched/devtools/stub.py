"""An in-process fake vLLM OpenAI server (tests and the gateway benchmark) and a uvicorn runner.

The stub answers ``/v1/completions`` and ``/v1/chat/completions`` (streaming one SSE event per token, like
vLLM, or one JSON body), ``/v1/embeddings`` and ``/tokenize`` (vLLM's shapes, made-up numbers), ``/metrics``
(vLLM's gauges), ``/health``. Knobs make it slow (per-token delay,
first-byte delay), fail (HTTP status), or break the stream after some tokens; it records every body it
received so tests can check what the gateway forwarded (priority, ``vllm_xargs``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import queue
import socket
import struct
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from slosched.devtools import stub_responses
from slosched.gateway.http.server import listen


class StubStreamBrokenError(Exception):
    """Raised inside the stub's stream to cut the connection mid-body."""


@dataclass(slots=True)
class StubBehaviour:
    """``token_delay_s`` between tokens, ``first_byte_delay_s`` before anything, ``status`` to answer,
    ``break_after_tokens`` cuts a streamed body after that many events (None: never)."""

    token_delay_s: float = 0.0
    first_byte_delay_s: float = 0.0
    status: int = 200
    break_after_tokens: int | None = None
    default_tokens: int = 8


@dataclass(slots=True)
class StubBackend:
    """A fake vLLM server; ``received`` holds (path, body) of every request to a model route, ``request_ids``
    the ``x-request-id`` header each came with (None: none)."""

    name: str = "stub"
    behaviour: StubBehaviour = field(default_factory=StubBehaviour)
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    request_ids: list[str | None] = field(default_factory=list)
    running: int = 0
    max_tokens_seen: int = 0
    responses: dict[str, dict[str, Any]] = field(default_factory=dict)  # stored, as vLLM keeps them

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/completions", self._generate, methods=["POST"]),
                Route("/v1/chat/completions", self._generate, methods=["POST"]),
                Route("/v1/messages", self._message, methods=["POST"]),
                Route("/v1/responses", partial(stub_responses.create, self), methods=["POST"]),
                Route("/v1/responses/{response_id}", partial(stub_responses.retrieve, self), methods=["GET"]),
                Route("/v1/responses/{response_id}/cancel", partial(stub_responses.cancel, self), methods=["POST"]),
                Route("/v1/embeddings", self._embed, methods=["POST"]),
                Route("/tokenize", self._tokenize, methods=["POST"]),
                Route("/metrics", self._metrics, methods=["GET"]),
                Route("/health", self._health, methods=["GET"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    async def _health(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "tiny", "object": "model"}]})

    async def _metrics(self, request: Request) -> Response:
        text = (
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{engine="0",model_name="tiny"}} {self.running}\n'
            "# TYPE vllm:num_requests_waiting gauge\n"
            'vllm:num_requests_waiting{engine="0",model_name="tiny"} 0\n'
            "# TYPE vllm:kv_cache_usage_perc gauge\n"
            f'vllm:kv_cache_usage_perc{{engine="0",model_name="tiny"}} {min(self.running / 100, 1.0)}\n'
        )
        return PlainTextResponse(text)

    async def _generate(self, request: Request) -> Response:
        body = json.loads(await request.body())
        path = request.url.path
        self.received.append((path, body))
        self.request_ids.append(request.headers.get("x-request-id"))
        behaviour = self.behaviour
        if behaviour.first_byte_delay_s:
            await asyncio.sleep(behaviour.first_byte_delay_s)
        if behaviour.status != 200:
            return JSONResponse({"error": {"message": "stub failure"}}, status_code=behaviour.status)
        tokens = int(body.get("max_tokens") or behaviour.default_tokens)
        self.max_tokens_seen = max(self.max_tokens_seen, tokens)
        chat = path.endswith("chat/completions")
        sequences = _choices(body)
        if body.get("stream"):
            asked = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(self._events(tokens, chat, sequences, asked), media_type="text/event-stream")
        self.running += 1
        try:
            await asyncio.sleep(behaviour.token_delay_s * tokens)
        finally:
            self.running -= 1
        content = {"message": {"role": "assistant", "content": "x " * tokens}} if chat else {"text": "x " * tokens}
        choices = [{"index": index, "finish_reason": "length", **content} for index in range(sequences)]
        usage = {"prompt_tokens": 4, "completion_tokens": tokens * sequences, "total_tokens": tokens * sequences + 4}
        return JSONResponse({"id": self.name, "object": "completion", "choices": choices, "usage": usage})

    async def _message(self, request: Request) -> Response:
        """Anthropic's Messages API in vLLM's shapes: a message, or its event stream (usage at the end)."""
        body = json.loads(await request.body())
        self.received.append((request.url.path, body))
        behaviour = self.behaviour
        if behaviour.status != 200:
            error = {"type": "error", "error": {"type": "api_error", "message": "stub failure"}}
            return JSONResponse(error, status_code=behaviour.status)
        tokens = int(body.get("max_tokens") or behaviour.default_tokens)
        if body.get("stream"):
            return StreamingResponse(self._message_events(tokens), media_type="text/event-stream")
        await asyncio.sleep(behaviour.token_delay_s * tokens)
        message = {"id": f"msg_{self.name}", "type": "message", "role": "assistant", "model": body.get("model")}
        content = [{"type": "text", "text": "x " * tokens}]
        usage = {"input_tokens": 4, "output_tokens": tokens}
        return JSONResponse({**message, "content": content, "stop_reason": "max_tokens", "usage": usage})

    async def _message_events(self, tokens: int) -> AsyncIterator[bytes]:
        def event(name: str, **data: Any) -> bytes:
            return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

        self.running += 1
        try:
            start = {"id": f"msg_{self.name}", "type": "message", "role": "assistant", "content": []}
            yield event("message_start", message={**start, "usage": {"input_tokens": 4, "output_tokens": 0}})
            yield event("content_block_start", index=0, content_block={"type": "text", "text": ""})
            for index in range(tokens):
                if self.behaviour.break_after_tokens is not None and index >= self.behaviour.break_after_tokens:
                    raise StubStreamBrokenError("stub cut the stream")
                if self.behaviour.token_delay_s:
                    await asyncio.sleep(self.behaviour.token_delay_s)
                yield event("content_block_delta", index=0, delta={"type": "text_delta", "text": "x "})
            yield event("content_block_stop", index=0)
            yield event("message_delta", delta={"stop_reason": "max_tokens"}, usage={"output_tokens": tokens})
            yield event("message_stop")
        finally:
            self.running -= 1

    async def _embed(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.received.append((request.url.path, body))
        if self.behaviour.status != 200:
            return JSONResponse({"error": {"message": "stub failure"}}, status_code=self.behaviour.status)
        texts = body.get("input") if isinstance(body.get("input"), list) else [body.get("input")]
        vectors = [[0.5, -0.5, float(len(str(text)))] for text in texts]
        if (
            body.get("encoding_format") == "base64"
        ):  # as vLLM: little-endian float32, base64 (the OpenAI client's default)
            encoded: list[Any] = [base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() for v in vectors]
        else:
            encoded = vectors
        data = [{"object": "embedding", "index": i, "embedding": vector} for i, vector in enumerate(encoded)]
        usage = {"prompt_tokens": sum(len(str(t)) // 4 + 1 for t in texts), "total_tokens": 0}
        return JSONResponse(
            {"id": self.name, "object": "list", "data": data, "model": body.get("model"), "usage": usage}
        )

    async def _tokenize(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.received.append((request.url.path, body))
        tokens = list(range(len(str(body.get("prompt", ""))) // 4 + 1))
        return JSONResponse({"count": len(tokens), "max_model_len": 2048, "tokens": tokens})

    async def _events(self, tokens: int, chat: bool, sequences: int, usage: bool) -> AsyncIterator[bytes]:
        """vLLM's stream: per step one event per choice (n choices interleaved), then the usage chunk when the
        request asked for it (``stream_options.include_usage``)."""
        self.running += 1
        try:
            delta = {"delta": {"content": "x "}} if chat else {"text": "x "}
            for index in range(tokens):
                if self.behaviour.break_after_tokens is not None and index >= self.behaviour.break_after_tokens:
                    raise StubStreamBrokenError("stub cut the stream")
                if self.behaviour.token_delay_s:
                    await asyncio.sleep(self.behaviour.token_delay_s)
                for choice in range(sequences):
                    event = {"id": self.name, "choices": [{"index": choice, **delta, "finish_reason": None}]}
                    yield f"data: {json.dumps(event)}\n\n".encode()
            if usage:
                counts = {"prompt_tokens": 4, "completion_tokens": tokens * sequences}
                yield f"data: {json.dumps({'id': self.name, 'choices': [], 'usage': counts})}\n\n".encode()
            yield b"data: [DONE]\n\n"
        finally:
            self.running -= 1


def _choices(body: dict[str, Any]) -> int:
    """As vLLM: ``n`` choices of each prompt (a completions batch is a list of texts or of token lists), their
    tokens summed in the usage."""
    prompt = body.get("prompt")
    prompts = len(prompt) if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list) else 1
    return prompts * int(body.get("n") or 1)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Any:  # the test runner / bench owns signals, not this embedded server
        yield


@contextlib.asynccontextmanager
async def serve_app(
    app: Any, port: int | None = None, lifespan: Literal["auto", "on", "off"] = "off"
) -> AsyncIterator[str]:
    """Run an ASGI app on 127.0.0.1 in this event loop; yields its base URL; stops it on exit.

    The socket is bound here (the gateway's ``listen``: TCP without Nagle's delay) and handed to uvicorn: a
    port chosen by ``free_port`` and bound later could be handed to another server in between (CI once saw the
    stub take the gateway's chosen port)."""
    sock = listen("127.0.0.1", port or 0)
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="error", lifespan=lifespan, timeout_graceful_shutdown=1
    )
    server = _QuietServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    for _ in range(500):
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    if not server.started:
        task.cancel()
        sock.close()
        raise RuntimeError(f"server on port {port} did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=5)
        sock.close()


@contextlib.contextmanager
def stubs_in_thread(count: int, behaviour: StubBehaviour | None = None) -> Iterator[list[str]]:
    """``count`` stubs served on an event loop of their own in a daemon thread (for a caller whose own loop,
    or a child process, drives the load); yields their base URLs and stops them on exit."""
    ready: queue.Queue[list[str] | BaseException] = queue.Queue()
    stop = threading.Event()

    async def run() -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                apps = [StubBackend(name=f"s{i}", behaviour=behaviour or StubBehaviour()).app() for i in range(count)]
                ready.put([await stack.enter_async_context(serve_app(app)) for app in apps])
                while not stop.is_set():
                    await asyncio.sleep(0.05)
        except BaseException as error:  # handed to the caller, who raises it
            ready.put(error)

    thread = threading.Thread(target=lambda: asyncio.run(run()), daemon=True)
    thread.start()
    try:
        urls = ready.get(timeout=20)
        if isinstance(urls, BaseException):
            raise RuntimeError(f"stub backends did not start: {urls}") from urls
        yield urls
    finally:
        stop.set()
        thread.join(10)


def main(argv: list[str] | None = None) -> None:
    """``python -m slosched.devtools.stub --port P``: a standalone stub server (benchmarks run it apart)."""
    import argparse

    parser = argparse.ArgumentParser(description="fake vLLM OpenAI server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens", type=int, default=8)
    args = parser.parse_args(argv)
    stub = StubBackend(behaviour=StubBehaviour(default_tokens=args.tokens))
    uvicorn.run(stub.app(), host="127.0.0.1", port=args.port, log_level="error", access_log=False)


if __name__ == "__main__":
    main()
