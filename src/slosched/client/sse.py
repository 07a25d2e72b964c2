"""OpenAI streams on server-sent events: the SSE parsing is the ``httpx-sse`` library's, this module reads the
OpenAI layer on top for the SDK (``client/sdk.py``) and the profiling client (``tuning/openai_client.py``).

Library, not hand-written (issue 23): ``httpx-sse`` (>= 0.4.1) splits lines at CRLF, LF and CR only, as the
WHATWG spec says, so a U+2028/U+2029/U+0085 inside a model's raw UTF-8 text stays inside its event (httpx's
own ``iter_lines`` would cut it there). It replaced a hand-written parser at the same speed: the SDK's path
(``httpx.Response`` -> events -> JSON objects, 256 OpenAI chunks) costs x0.81-0.95 the hand-written one's
(two full runs, each the median of 9 interleaved rounds, 2-core machine; x1.05 in a 3-round quick run;
``slosched bench libs``, row ``sse``, which keeps the old parser to measure against).

Two things the library does its own way, handled here: it dispatches an event with empty data after any
``id:`` line has been seen (the spec drops it), so an event with no data is skipped like a comment; and it
refuses a response that is not ``text/event-stream``, which here is a broken stream (``StreamError``).
The text is decoded as UTF-8 with a leading BOM dropped, as the spec says (httpx would keep the BOM).

An OpenAI stream ends at ``data: [DONE]``; an error event (``{"error": {...}}``, vLLM's older
``{"object": "error", ...}``, or an ``event: error``) raises ``StreamError`` carrying the error object.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from typing import Any

import httpx
from httpx_sse import EventSource, ServerSentEvent, SSEError

DONE = "[DONE]"


class GatewayError(Exception):
    """A non-2xx answer from the gateway: ``status`` and the server's error message."""

    def __init__(self, status: int, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.retry_after_s = retry_after_s


class StreamError(GatewayError):
    """An error event inside a stream that had started (HTTP 200): ``error`` is the OpenAI-style error
    object as sent (``message``, ``type``, ``code``), ``status`` its numeric code (502 when it has none)."""

    def __init__(self, error: dict[str, Any]) -> None:
        code = error.get("code")
        status = code if isinstance(code, int) and 400 <= code <= 599 else 502
        super().__init__(status, str(error.get("message") or "error event in the stream")[:500])
        self.error = error


def _not_sse(error: SSEError) -> StreamError:
    return StreamError({"message": f"not a stream of server-sent events: {error}", "type": "bad_stream"})


def _events(response: httpx.Response) -> EventSource:
    # The stream is UTF-8 whatever its header says (the spec), and a BOM opening it is not text: utf-8-sig
    # drops it, where httpx-sse would keep it and lose the first field to it.
    response.encoding = "utf-8-sig"
    return EventSource(response)


def openai_event(event: ServerSentEvent) -> dict[str, Any] | None:
    """The JSON object of one OpenAI stream event; None at ``[DONE]``. Raises ``StreamError`` for an error
    event or data that is not a JSON object."""
    if event.data == DONE:
        return None
    try:
        payload = json.loads(event.data)
    except json.JSONDecodeError:
        raise StreamError({"message": f"malformed stream event {event.data[:64]!r}", "type": "bad_stream"}) from None
    if not isinstance(payload, dict):
        raise StreamError({"message": f"stream event is not a JSON object: {event.data[:64]!r}", "type": "bad_stream"})
    error = payload.get("error")
    if isinstance(error, dict):
        raise StreamError(error)
    if error is not None or payload.get("object") == "error" or event.event == "error":
        raise StreamError(payload if error is None else {"message": str(error)})
    return payload


def iter_openai(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The JSON events of an OpenAI stream's (open, unread) response, up to ``[DONE]``."""
    try:
        for event in _events(response).iter_sse():
            if not event.data:
                continue  # no data lines: nothing the spec dispatches
            payload = openai_event(event)
            if payload is None:
                return
            yield payload
    except SSEError as error:
        raise _not_sse(error) from None


async def aiter_openai(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """``iter_openai`` over an asynchronous response."""
    try:
        async with aclosing(_events(response).aiter_sse()) as events:
            async for event in events:
                if not event.data:
                    continue
                payload = openai_event(event)
                if payload is None:
                    return
                yield payload
    except SSEError as error:
        raise _not_sse(error) from None
