"""Streamed-token accounting: exact counts from the backend's final usage chunk (which the gateway requests
and strips unless the client asked for it), event counting as the fallback; the plain-ASGI call routes."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
from collections.abc import AsyncIterator
from typing import Any, cast

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from slosched.core.request import Request as SloRequest
from slosched.devtools.stub import serve_app
from slosched.gateway.backends.forwarding import ANTHROPIC, StreamTokens, adds_usage, usage_tokens
from slosched.gateway.calls.call import Call
from slosched.gateway.dispatch.queues import LiveSeq
from slosched.gateway.http.app import Gateway
from slosched.gateway.ops.config import parse_config
from tests.gateway.helpers import stub_config

_USAGE = b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7,"total_tokens":10}}\n\n'


def _seq() -> LiveSeq:
    request = SloRequest(
        id="r",
        job_id="j",
        stage="s",
        template="t",
        prompt_tokens=3,
        max_output_tokens=8,
        arrival_s=0.0,
        job_arrival_s=0.0,
    )
    return LiveSeq(request, 3, 0.0, cast("asyncio.Future[None]", None))  # admission is not used here


def _event(text: str) -> bytes:
    return b"data: " + json.dumps({"id": "c", "choices": [{"index": 0, "text": text}]}).encode() + b"\n\n"


def test_usage_chunk_gives_the_exact_count_and_is_stripped() -> None:
    seq = _seq()
    tokens = StreamTokens(seq, lambda: 1.0, strip_usage=True)
    coalesced = _event("a b c") + _event("d")  # 7 tokens in 2 events (a backend under load coalesces)
    out = tokens.feed(coalesced[:10]) + tokens.feed(coalesced[10:] + _USAGE[:20])  # split events
    assert out == coalesced and seq.num_output_tokens == 2 and seq.first_token_s == 1.0
    out = tokens.feed(_USAGE[20:] + b"data: [DONE]\n\n") + tokens.flush()
    assert out == b"data: [DONE]\n\n" and seq.num_output_tokens == 7


def test_usage_chunk_is_kept_when_the_client_asked_and_events_count_without_it() -> None:
    seq = _seq()
    tokens = StreamTokens(seq, lambda: 1.0, strip_usage=False)
    assert tokens.feed(_event("a") + _USAGE) == _event("a") + _USAGE and seq.num_output_tokens == 7
    seq = _seq()
    tokens = StreamTokens(seq, lambda: 1.0, strip_usage=True)
    assert tokens.feed(_event("a") + _event("b") + b"data: [DONE]\n\n") and seq.num_output_tokens == 2
    assert tokens.feed(b'{"error": "not SSE"}') == b"" and tokens.flush() == b'{"error": "not SSE"}'
    assert adds_usage({}) and adds_usage({"stream_options": {"continuous_usage_stats": True}})
    assert not adds_usage({"stream_options": {"include_usage": True}}) and not adds_usage({"stream_options": 3})


def test_a_stream_of_n_choices_moves_each_sequence_by_its_share_and_keeps_the_sum() -> None:
    """vLLM streams a call's n choices interleaved, one event per token of any of them: the queue entry's
    progress is one sequence's (what the router's remaining-work estimate reads), the total every choice's
    (what the tenant was charged and the beliefs divide)."""
    seq = _seq()
    seq.sequences = 4
    tokens = StreamTokens(seq, lambda: 1.0, strip_usage=True)
    tokens.feed(b"".join(_event(str(i)) for i in range(8)))
    assert (tokens.total, seq.num_output_tokens) == (8, 2)
    tokens.feed(_event("x"))  # a choice ahead of the others: progress rounds, never drops below one token
    assert (tokens.total, seq.num_output_tokens) == (9, 2)
    tokens.feed(_USAGE.replace(b":7", b":40") + b"data: [DONE]\n\n")
    assert (tokens.total, seq.num_output_tokens) == (40, 10)


class _UsageBackend:
    """A vLLM-like backend: one event per token, and the final usage chunk when asked for it."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/completions", self._generate, methods=["POST"]),
                Route("/health", self._ok),
                Route("/metrics", self._ok),
            ]
        )

    async def _ok(self, request: Request) -> Response:
        return Response("")

    async def _generate(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.received.append(body)
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if not body.get("stream"):  # a whole JSON body, as vLLM answers (a 200 that is not JSON is a failure)
            return Response(b'{"choices": [], "usage": {"completion_tokens": 5}}', media_type="application/json")

        async def events() -> AsyncIterator[bytes]:
            yield _event("a b c") + _event("d e")  # 5 tokens, 2 events
            if usage:
                yield _USAGE.replace(b":7", b":5")
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")


@contextlib.asynccontextmanager
async def _gateway() -> AsyncIterator[tuple[str, Gateway, _UsageBackend, list[Call]]]:
    backend = _UsageBackend()
    async with contextlib.AsyncExitStack() as stack:
        url = await stack.enter_async_context(serve_app(backend.app()))
        gateway = Gateway(parse_config(stub_config([url])))
        finished: list[Call] = []
        finish = gateway.dispatcher.finish

        def recording_finish(call: Call, *args: Any) -> None:
            finish(call, *args)
            finished.append(call)

        gateway.dispatcher.finish = recording_finish  # type: ignore[method-assign]
        yield await stack.enter_async_context(serve_app(gateway.app, lifespan="on")), gateway, backend, finished


def test_gateway_requests_usage_strips_it_and_counts_exactly() -> None:
    async def scenario() -> None:
        async with _gateway() as (url, _, backend, finished), httpx.AsyncClient(base_url=url) as client:
            body = {"prompt": "p", "max_tokens": 5, "stream": True}
            text = (await client.post("/v1/completions", json=body)).text
            assert '"usage"' not in text and text.endswith("data: [DONE]\n\n")
            assert backend.received[0]["stream_options"] == {"include_usage": True}
            assert finished[0].output_tokens == 5 and finished[0].outcome == "completed"
            asked = {**body, "stream_options": {"include_usage": True}}
            text = (await client.post("/v1/completions", json=asked)).text
            assert '"completion_tokens":5' in text and finished[1].output_tokens == 5

    asyncio.run(scenario())


def test_call_routes_answer_wrong_methods_big_bodies_and_trailing_slashes() -> None:
    async def scenario() -> None:
        async with _gateway() as (url, gateway, _, _), httpx.AsyncClient(base_url=url) as client:
            wrong = await client.get("/v1/completions")
            assert wrong.status_code == 405 and "POST" in wrong.json()["error"]["message"]
            big = await client.post("/v1/completions", content=b"x" * (gateway.config.max_body_bytes + 1))
            assert big.status_code == 413 and big.json()["error"]["type"] == "body_too_large"
            slash = await client.post("/v1/completions/", json={"prompt": "p", "max_tokens": 2})
            assert slash.status_code == 200
            assert (await client.get("/health")).status_code == 200  # other routes: starlette
            assert gc.get_freeze_count() > 0  # startup objects are out of the collector's way while serving
        assert gc.get_freeze_count() == 0  # ...and given back when the last gateway stops

    asyncio.run(scenario())


def _anthropic(name: str, **data: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()


def test_an_anthropic_stream_counts_its_text_deltas_and_takes_the_final_usage_only() -> None:
    """Anthropic's events: ``message_start`` carries a usage of nothing yet (it must not freeze the count),
    text arrives in ``content_block_delta`` events, the exact count in ``message_delta``; ``message_stop``
    ends a whole stream. Nothing is stripped."""
    seq = _seq()
    tokens = StreamTokens(seq, lambda: 2.0, strip_usage=True, form=ANTHROPIC)
    start = _anthropic("message_start", message={"id": "m", "usage": {"input_tokens": 3, "output_tokens": 1}})
    deltas = b"".join(_anthropic("content_block_delta", index=0, delta={"text": "ab"}) for _ in range(3))
    head = start + _anthropic("content_block_start", index=0, content_block={"type": "text", "text": ""}) + deltas
    assert tokens.feed(head[:25]) + tokens.feed(head[25:]) == head
    assert seq.num_output_tokens == 3 and seq.first_token_s == 2.0 and not tokens.done
    tail = _anthropic("content_block_stop", index=0)
    tail += _anthropic("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 5})
    tail += _anthropic("message_stop")
    assert tokens.feed(tail) == tail and tokens.flush() == b""
    assert seq.num_output_tokens == 5 and tokens.done
    assert usage_tokens(b'{"type":"message","usage":{"input_tokens":3,"output_tokens":9}}', ANTHROPIC) == 9
