"""The one SSE parser (client/sse.py) and the SDK's streams on it: events split at blank lines only (never at
U+2028/U+2029), error events raise ``StreamError`` with the OpenAI-style error."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.client.sdk import AsyncClient, Client, GatewayError, StreamError
from slosched.client.sse import SseEvent, SseParser, iter_openai
from slosched.devtools.stub import StubBehaviour
from slosched.tuning.openai_client import EndpointError, aiter_stream_events
from tests.gateway.helpers import harness

# Raw UTF-8 (ensure_ascii=False), as servers that do not escape non-ASCII send it.
_TEXT = "line\u2028sep\u2029para\x85nel\u000bvt"


def _event(payload: object) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


_BODY = _event({"choices": [{"text": _TEXT}]}) + _event({"choices": [{"text": "b"}]}) + b"data: [DONE]\n\n"
_ERROR = {"message": "backend failed mid-stream: ReadError", "type": "backend_failed", "code": 502}


def _parse(chunks: list[bytes]) -> list[SseEvent]:
    parser = SseParser()
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    return events + parser.close()


def test_unicode_line_separators_stay_inside_the_event() -> None:
    events = list(iter_openai([_BODY]))
    assert [event["choices"][0]["text"] for event in events] == [_TEXT, "b"]


def test_spec_fields_comments_multiline_data_and_line_ends() -> None:
    raw = b"\xef\xbb\xbf: keep-alive\r\nevent: update\rid: 7\ndata: one\r\ndata:two\n\ndata: three\r\n\r\n"
    assert _parse([raw]) == [SseEvent("one\ntwo", "update", "7"), SseEvent("three", "message", "7")]


def test_an_event_without_its_blank_line_is_dropped_at_the_end() -> None:
    assert _parse([b"data: a\n\ndata: cut"]) == [SseEvent("a")]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(_BODY)), max_size=12))
def test_any_chunking_gives_the_same_events(cuts: list[int]) -> None:
    """Chunk boundaries anywhere (inside a CRLF, inside a UTF-8 character) change nothing."""
    body = _BODY.replace(b"\n", b"\r\n")
    points = sorted(set(cuts))
    chunks = [body[start:end] for start, end in zip([0, *points], [*points, len(body)], strict=True)]
    assert _parse(chunks) == _parse([body])
    assert _parse(chunks)[0].data == json.dumps({"choices": [{"text": _TEXT}]}, ensure_ascii=False)


@pytest.mark.parametrize(
    ("event", "status", "message"),
    [
        (_event({"error": _ERROR}), 502, "backend failed mid-stream: ReadError"),
        (_event({"object": "error", "message": "bad", "type": "BadRequestError", "code": 400}), 400, "bad"),
        (b'event: error\ndata: {"message": "overloaded"}\n\n', 502, "overloaded"),
        (b"data: {not json\n\n", 502, "malformed stream event"),
    ],
)
def test_error_events_raise_with_the_error_object(event: bytes, status: int, message: str) -> None:
    seen: list[dict[str, object]] = []
    with pytest.raises(StreamError) as caught:
        seen.extend(iter_openai([_event({"choices": [{"text": "a"}]}), event]))
    assert isinstance(caught.value, GatewayError) and caught.value.status == status
    assert message in caught.value.message and caught.value.error
    assert seen == [{"choices": [{"text": "a"}]}]


def _mock_client(body: bytes) -> Client:
    client = Client("http://gateway.test")
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    client.http = httpx.Client(base_url="http://gateway.test", transport=transport)
    return client


def test_sdk_stream_keeps_u2028_and_raises_on_error_event() -> None:
    with _mock_client(_BODY) as client:
        texts = [event["choices"][0]["text"] for event in client.stream("/v1/completions", {"prompt": "p"})]
    assert texts == [_TEXT, "b"]
    broken = _event({"choices": [{"text": "a"}]}) + _event({"error": _ERROR})
    with _mock_client(broken) as client, pytest.raises(StreamError, match="mid-stream") as caught:
        list(client.stream("/v1/completions", {"prompt": "p"}))
    assert caught.value.error == _ERROR


def test_async_sdk_raises_the_gateways_error_event_when_a_backend_breaks_mid_stream() -> None:
    async def scenario() -> None:
        async with harness(num_stubs=1) as h:
            h.stubs[0].behaviour = StubBehaviour(break_after_tokens=3)
            seen: list[dict[str, object]] = []
            async with AsyncClient(h.url) as client:
                with pytest.raises(StreamError) as caught:
                    async for event in client.stream("/v1/completions", {"prompt": "p", "max_tokens": 8}):
                        seen.append(event)
            assert len(seen) == 3 and caught.value.status == 502
            assert "mid-stream" in caught.value.message

    asyncio.run(scenario())


def test_profiling_client_streams_use_the_same_parser() -> None:
    """``tuning.openai_client.aiter_stream_events`` (profiling, fidelity replays): U+2028 kept, an error event
    raised as its ``EndpointError``."""

    async def scenario() -> list[dict[str, object]]:
        body = _event({"choices": [{"text": _TEXT}]}) + _event({"error": _ERROR}) + b"data: [DONE]\n\n"
        transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
        seen: list[dict[str, object]] = []
        async with httpx.AsyncClient(transport=transport, base_url="http://engine.test") as http:
            with pytest.raises(EndpointError, match="mid-stream"):
                async with http.stream("POST", "/v1/completions") as response:
                    async for event in aiter_stream_events(response):
                        seen.append(event)
        return seen

    assert asyncio.run(scenario()) == [{"choices": [{"text": _TEXT}]}]
