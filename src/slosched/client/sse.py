"""Server-sent events as the WHATWG spec parses them, and OpenAI streams on top: the one SSE parser of the
SDK (``client/sdk.py``) and the other clients.

Lines end at CRLF, LF or CR only, and an event ends at a blank line. Splitting text with ``str.splitlines``
(or httpx's ``iter_lines``) also cuts at U+2028, U+2029, U+0085, ..., which a model's raw UTF-8 output may
hold inside a JSON string: the cut event is not JSON. Lines are split as bytes here, before decoding (in
UTF-8 the bytes of CR and LF never occur inside another character).

An OpenAI stream ends at ``data: [DONE]``; an error event (``{"error": {...}}``, vLLM's older
``{"object": "error", ...}``, or an ``event: error``) raises ``StreamError`` carrying the error object.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

_LINE_END = re.compile(rb"\r\n|\r|\n")
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


@dataclass(slots=True, frozen=True)
class SseEvent:
    """One dispatched event: its data lines joined by LF, its type (``message`` by default), last id."""

    data: str
    event: str = "message"
    id: str | None = None


class SseParser:
    """Incremental parser: ``feed`` bytes as they arrive, get the events they complete. An event the stream
    does not end with a blank line is dropped at ``close`` (the spec's rule for a cut stream)."""

    def __init__(self) -> None:
        self._pending = b""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._first = True

    def feed(self, chunk: bytes) -> list[SseEvent]:
        buffer = self._pending + chunk if self._pending else chunk
        events: list[SseEvent] = []
        start = 0
        for match in _LINE_END.finditer(buffer):
            if match.end() == len(buffer) and match.group() == b"\r":
                break  # a CR last in the chunk may be the first half of a CRLF
            event = self._line(buffer[start : match.start()])
            start = match.end()
            if event is not None:
                events.append(event)
        self._pending = buffer[start:]
        return events

    def close(self) -> list[SseEvent]:
        """The end of the stream: a line ended by a last CR still counts; an unfinished event does not."""
        events = self.feed(b"\n") if self._pending.endswith(b"\r") else []
        self._pending, self._data = b"", []
        return events

    def _line(self, raw: bytes) -> SseEvent | None:
        line = raw.decode("utf-8", errors="replace")
        if self._first:
            self._first = False
            line = line.removeprefix("\ufeff")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment (keep-alive)
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None  # "retry" and unknown fields are ignored, as the spec says

    def _dispatch(self) -> SseEvent | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:
            return None
        return SseEvent("\n".join(data), event or "message", self._id)


def openai_event(event: SseEvent) -> dict[str, Any] | None:
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


def iter_openai(chunks: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON events of an OpenAI stream's body, up to ``[DONE]``."""
    parser = SseParser()
    for chunk in chunks:
        for event in parser.feed(chunk):
            payload = openai_event(event)
            if payload is None:
                return
            yield payload
    for event in parser.close():
        payload = openai_event(event)
        if payload is None:
            return
        yield payload


async def aiter_openai(chunks: AsyncIterable[bytes]) -> AsyncIterator[dict[str, Any]]:
    """``iter_openai`` over an asynchronous body."""
    parser = SseParser()
    async for chunk in chunks:
        for event in parser.feed(chunk):
            payload = openai_event(event)
            if payload is None:
                return
            yield payload
    for event in parser.close():
        payload = openai_event(event)
        if payload is None:
            return
        yield payload
