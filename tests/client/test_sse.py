"""The SSE parsing (httpx-sse, read by client/sse.py) and the SDK's streams on it: events split at blank lines
only (never at U+2028/U+2029), error events raise ``StreamError`` with the OpenAI-style error."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from httpx_sse import EventSource
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.client.sdk import AsyncClient, Client, GatewayError, StreamError
from slosched.client.sse import iter_openai
from slosched.devtools.stub import StubBehaviour
from slosched.tuning.openai_client import EndpointError, aiter_stream_events
from tests.gateway.helpers import harness

# Raw UTF-8 (ensure_ascii=False), as servers that do not escape non-ASCII send it.
_TEXT = "line\u2028sep\u2029para\x85nel\u000bvt"


def _event(payload: object) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


_BODY = _event({"choices": [{"text": _TEXT}]}) + _event({"choices": [{"text": "b"}]}) + b"data: [DONE]\n\n"
_SSE = {"content-type": "text/event-stream"}
_ERROR = {"message": "backend failed mid-stream: ReadError", "type": "backend_failed", "code": 502}


def _response(chunks: list[bytes], content_type: str = "text/event-stream") -> httpx.Response:
    """An unread response whose body arrives in exactly these chunks."""
    return httpx.Response(200, headers={"content-type": content_type}, content=iter(chunks))


def _parse(chunks: list[bytes]) -> list[tuple[str, str, str]]:
    """(data, event type, last id) of each event the library dispatches."""
    return [(event.data, event.event, event.id) for event in EventSource(_response(chunks)).iter_sse()]


def test_unicode_line_separators_stay_inside_the_event() -> None:
    events = list(iter_openai(_response([_BODY])))
    assert [event["choices"][0]["text"] for event in events] == [_TEXT, "b"]


def test_spec_fields_comments_multiline_data_and_line_ends() -> None:
    raw = b"\xef\xbb\xbf: keep-alive\r\nevent: update\rid: 7\ndata: one\r\ndata:two\n\ndata: three\r\n\r\n"
    assert _parse([raw]) == [("one\ntwo", "update", "7"), ("three", "message", "7")]


def test_an_event_without_its_blank_line_is_dropped_at_the_end() -> None:
    assert _parse([b"data: a\n\ndata: cut"]) == [("a", "message", "")]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(_BODY)), max_size=12))
def test_any_chunking_gives_the_same_events(cuts: list[int]) -> None:
    """Chunk boundaries anywhere (inside a CRLF, inside a UTF-8 character) change nothing."""
    body = _BODY.replace(b"\n", b"\r\n")
    points = sorted(set(cuts))
    chunks = [body[start:end] for start, end in zip([0, *points], [*points, len(body)], strict=True)]
    assert _parse(chunks) == _parse([body])
    assert _parse(chunks)[0][0] == json.dumps({"choices": [{"text": _TEXT}]}, ensure_ascii=False)


def test_events_without_data_are_skipped_even_after_an_id() -> None:
    """httpx-sse dispatches an empty event at a blank line once an ``id:`` was seen (the spec would not): the
    OpenAI layer skips it instead of failing on its empty JSON."""
    body = b'id: 1\ndata: {"a": 1}\n\n: keep-alive\n\nid: 2\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n'
    assert list(iter_openai(_response([body]))) == [{"a": 1}, {"b": 2}]


def test_a_byte_order_mark_opening_the_stream_is_dropped() -> None:
    body = b'\xef\xbb\xbfdata: {"a": 1}\n\ndata: [DONE]\n\n'
    assert list(iter_openai(_response([body[:1], body[1:]]))) == [{"a": 1}]


def test_a_body_that_is_not_server_sent_events_is_a_stream_error() -> None:
    with pytest.raises(StreamError, match="not a stream of server-sent events") as caught:
        list(iter_openai(_response([b'{"choices": []}'], content_type="application/json")))
    assert caught.value.status == 502 and caught.value.error["type"] == "bad_stream"


def test_the_async_reader_stops_at_done_and_closes_the_events() -> None:
    async def scenario() -> list[dict[str, object]]:
        from slosched.client.sse import aiter_openai

        async def body() -> AsyncIterator[bytes]:
            yield _BODY
            yield _event({"never": "read"})

        response = httpx.Response(200, headers=_SSE, content=body())
        return [event async for event in aiter_openai(response)]

    assert asyncio.run(scenario()) == [{"choices": [{"text": _TEXT}]}, {"choices": [{"text": "b"}]}]


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
        seen.extend(iter_openai(_response([_event({"choices": [{"text": "a"}]}), event])))
    assert isinstance(caught.value, GatewayError) and caught.value.status == status
    assert message in caught.value.message and caught.value.error
    assert seen == [{"choices": [{"text": "a"}]}]


def _mock_client(body: bytes) -> Client:
    client = Client("http://gateway.test")
    transport = httpx.MockTransport(lambda request: httpx.Response(200, headers=_SSE, content=body))
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
        transport = httpx.MockTransport(lambda request: httpx.Response(200, headers=_SSE, content=body))
        seen: list[dict[str, object]] = []
        async with httpx.AsyncClient(transport=transport, base_url="http://engine.test") as http:
            with pytest.raises(EndpointError, match="mid-stream"):
                async with http.stream("POST", "/v1/completions") as response:
                    async for event in aiter_stream_events(response):
                        seen.append(event)
        return seen

    assert asyncio.run(scenario()) == [{"choices": [{"text": _TEXT}]}]
