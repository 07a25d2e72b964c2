"""``sse``: the SDK's stream path, ``httpx.Response`` -> events -> OpenAI JSON objects, over 256 completion
chunks: the hand-written parser that ``client/sse.py`` had before issue 23 (kept here, in short, only to
measure against) fed ``iter_bytes``, vs ``client/sse.py`` now (httpx-sse's ``EventSource``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import httpx
import orjson

from slosched.bench.libs.setup import Pair

_LINE_END = re.compile(rb"\r\n|\r|\n")
_EVENTS = 256
_HEADERS = {"content-type": "text/event-stream"}


class _HandWritten:
    """The replaced parser's ``feed``/``_line``/``_dispatch`` (lines split as bytes at CRLF, LF or CR)."""

    def __init__(self) -> None:
        self.pending = b""
        self.data: list[str] = []
        self.event = ""
        self.id: str | None = None
        self.first = True

    def feed(self, chunk: bytes) -> list[Any]:
        buffer = self.pending + chunk if self.pending else chunk
        events, start = [], 0
        for match in _LINE_END.finditer(buffer):
            if match.end() == len(buffer) and match.group() == b"\r":
                break
            event = self.line(buffer[start : match.start()])
            start = match.end()
            if event is not None:
                events.append(event)
        self.pending = buffer[start:]
        return events

    def line(self, raw: bytes) -> Any:
        line = raw.decode("utf-8", errors="replace")
        if self.first:
            self.first, line = False, line.removeprefix("\ufeff")
        if not line:
            data, event = self.data, self.event
            self.data, self.event = [], ""
            return httpx_sse_event("\n".join(data), event or "message", self.id) if data else None
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self.data.append(value)
        elif name == "event":
            self.event = value
        elif name == "id" and "\0" not in value:
            self.id = value
        return None


def httpx_sse_event(data: str, event: str, id: str | None) -> Any:
    from httpx_sse import ServerSentEvent

    return ServerSentEvent(event=event, data=data, id=id or "")


def _chunks() -> list[bytes]:
    events = []
    for index in range(_EVENTS):
        choice = {"index": 0, "text": f" token{index}", "finish_reason": None}
        chunk = {"id": "cmpl-1", "object": "text_completion", "model": "m", "choices": [choice]}
        events.append(b"data: " + orjson.dumps(chunk) + b"\n\n")
    return [*events, b"data: [DONE]\n\n"]


def _hand_written(chunks: list[bytes]) -> Iterator[dict[str, Any]]:
    from slosched.client.sse import openai_event

    parser = _HandWritten()
    for chunk in httpx.Response(200, headers=_HEADERS, content=iter(chunks)).iter_bytes():
        for event in parser.feed(chunk):
            payload = openai_event(event)
            if payload is None:
                return
            yield payload


def pairs() -> list[Pair]:
    from slosched.client.sse import iter_openai

    chunks = _chunks()

    def ours() -> int:
        return sum(1 for _ in _hand_written(chunks))

    def theirs() -> int:
        return sum(1 for _ in iter_openai(httpx.Response(200, headers=_HEADERS, content=iter(chunks))))

    if not ours() == theirs() == _EVENTS:
        raise AssertionError("the two SSE paths disagree")
    return [Pair("sse", f"httpx-sse {version('httpx-sse')}", ours, theirs, _EVENTS, "stream event", reps=20)]
