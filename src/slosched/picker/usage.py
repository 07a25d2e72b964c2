"""What a response tells the picker: how many tokens the call produced, read as the response passes by.

Envoy shows the picker the response's phases when its ext_proc filter is configured to send them (GIE's does:
its reference picker reads ``usage`` from the response body). The gateway learns every belief from the calls
it forwards (``SlotSet.learn``); the picker forwards nothing, so without this its output-length predictor
never learned: every call of a template kept the predictor's prior. Here the status and content type come
from the response headers; a ``text/event-stream`` body is counted event by event with the gateway's own
``StreamTokens`` (into the call's queue entry, so the router sees the call's progress as the gateway's does,
and replaced by the exact ``usage.completion_tokens`` when the stream carries it); any other body is kept, up to
a bound, and its ``usage.completion_tokens`` read at the end (``usage_tokens``). Nothing is learned from an
error status, or when no count came through (a body past the bound, a stream without events).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from slosched.gateway.backends.forwarding import OPENAI, StreamFormat, StreamTokens, TokenProgress, usage_tokens

EVENT_STREAM = "text/event-stream"


class ResponseReader:
    """One response's token count: ``headers`` (if Envoy sends them), ``body`` per chunk, then
    ``output_tokens``. A response whose headers Envoy did not send is read as a stream when its body starts
    with an SSE ``data:`` or ``event:`` field."""

    __slots__ = ("_body", "_clock", "_format", "_limit", "_seq", "_size", "_tokens", "ok", "streamed")

    def __init__(
        self, seq: TokenProgress, clock: Callable[[], float], limit_bytes: int, form: StreamFormat = OPENAI
    ) -> None:
        self._seq = seq
        self._format = form  # the route's (``forwarding.stream_format``): Anthropic's Messages count their own way
        self._clock = clock
        self._limit = limit_bytes
        self._body: list[bytes] = []
        self._size = 0
        self._tokens: StreamTokens | None = None
        self.ok = True  # a 2xx status, or none seen
        self.streamed: bool | None = None  # None: not known yet

    def headers(self, headers: Mapping[str, str]) -> None:
        status = headers.get(":status", "")
        self.ok = not status.isdigit() or 200 <= int(status) < 300
        self._start(headers.get("content-type", "").lower().startswith(EVENT_STREAM))

    def body(self, chunk: bytes) -> None:
        if self.streamed is None:
            self._start(chunk.lstrip().startswith((b"data:", b"event:")))
        if self._tokens is not None:
            self._tokens.feed(chunk)  # counted only: Envoy forwards the bytes, whole or not
        elif self._size < self._limit:
            kept = chunk[: self._limit - self._size]
            self._body.append(kept)
            self._size += len(kept)

    def output_tokens(self) -> int:
        """The tokens the call produced (0: nothing to learn from)."""
        if not self.ok:
            return 0
        if self._tokens is not None:
            self._tokens.flush()  # a last event without its blank line is counted too
            return self._tokens.total  # every sequence's (the queue entry holds one's share)
        return usage_tokens(b"".join(self._body), self._format)

    def _start(self, streamed: bool) -> None:
        if self.streamed is not None:
            return
        self.streamed = streamed
        if streamed:
            self._tokens = StreamTokens(self._seq, self._clock, False, self._format)
