"""What the gateway sends to and reads from a backend: the forwarded body with policy metadata, SSE token
accounting (exact from the final usage chunk, which the gateway requests), and response-closing rules."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from slosched.contract import XARG_PREFIX, request_xargs
from slosched.core.request import Request
from slosched.gateway.backends.upstream import UpstreamError, UpstreamResponse, UpstreamTimeoutError
from slosched.gateway.calls.call import Call, per_sequence
from slosched.gateway.calls.messages import MESSAGES
from slosched.gateway.calls.other_routes import WITHOUT_PRIORITY, WITHOUT_XARGS
from slosched.gateway.calls.responses import RESPONSES
from slosched.gateway.ops.config import BackendConfig, GatewayConfig

_NO_DEADLINE_PRIORITY = 2**62  # vLLM priority for calls without a deadline: after every deadline
_COMPLETION_TOKENS = re.compile(rb'"completion_tokens"\s*:\s*(\d+)')
_OUTPUT_TOKENS = re.compile(rb'"output_tokens"\s*:\s*(\d+)')
_EMPTY_CHOICES = re.compile(rb'"choices"\s*:\s*\[\s*\]')


@dataclass(frozen=True, slots=True)
class StreamFormat:
    """How a route's response tells its tokens: ``token_event`` marks an event that carries generated text,
    ``ends`` the events that close a whole stream, ``usage`` the exact output count (in a JSON body, and in
    the stream's final usage); ``usage_event`` (None: any event with a usage) marks the one event whose usage
    is final (Anthropic's ``message_start`` carries a usage too, of nothing yet). ``asks_usage``: the
    gateway asks the backend for the usage chunk (OpenAI's ``stream_options``), stripped when the client
    did not ask."""

    token_event: bytes
    ends: tuple[bytes, ...]
    usage: re.Pattern[bytes]
    usage_event: bytes | None
    asks_usage: bool


OPENAI = StreamFormat(b"data: {", (b"data: [DONE]",), _COMPLETION_TOKENS, None, asks_usage=True)
ANTHROPIC = StreamFormat(
    b"event: content_block_delta", (b"event: message_stop",), _OUTPUT_TOKENS, b"event: message_delta", asks_usage=False
)
# The Responses API: every ``*.delta`` event is generated text (output, reasoning, tool-call arguments); the
# response's lifecycle events carry its usage (null until the last: completed, incomplete or failed).
RESPONSES_FORMAT = StreamFormat(
    b".delta\ndata:",
    (b"event: response.completed", b"event: response.incomplete", b"event: response.failed"),
    _OUTPUT_TOKENS,
    b"event: response.",
    asks_usage=False,
)
_FORMATS = {MESSAGES: ANTHROPIC, RESPONSES: RESPONSES_FORMAT}


def stream_format(path: str) -> StreamFormat:
    """The format of ``path``'s responses: Anthropic's Messages, OpenAI's Responses, or OpenAI's calls."""
    return _FORMATS.get(path, OPENAI)


def backend_body(
    call: Call,
    backend: BackendConfig,
    config: GatewayConfig,
    now_s: float,
    key: bytes | None = None,
    now_unix_s: float | None = None,
) -> dict[str, Any]:
    """The client's body plus policy metadata: vLLM ``priority`` (when the backend runs priority
    scheduling) and ``vllm_xargs`` for the engine plugin, signed with ``key`` (``contract.request_xargs``;
    ``now_unix_s``: ``now_s`` on the wall clock, from the gateway's ``UnixAnchor``).

    Whatever the engine schedules by comes from the gateway's decision (``call.request``), never from the
    client: a client's ``priority`` is dropped and its ``slosched_*`` extra arguments (refused earlier, in
    ``calls.call.parse_call``) are never forwarded. A route that does not read a field gets none of it
    (``other_routes.WITHOUT_PRIORITY``, ``WITHOUT_XARGS``)."""
    body = dict(call.body)
    request = call.request
    body.setdefault("model", backend.model)
    if call.stream and stream_format(call.path).asks_usage and adds_usage(call.body):
        body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    if backend.forward_priority and call.path not in WITHOUT_PRIORITY:
        body["priority"] = vllm_priority(request, config.priority_mode)
    else:
        body.pop("priority", None)
    given = body.get("vllm_xargs")
    xargs: dict[str, Any] = (
        {k: v for k, v in given.items() if not (isinstance(k, str) and k.startswith(XARG_PREFIX))}
        if isinstance(given, dict)
        else {}
    )
    if config.forward_xargs and call.path not in WITHOUT_XARGS:
        # Absolute times cross as Unix seconds: the engine is another process, on another clock.
        # Signed for the id the backend gets in x-request-id, which vLLM builds its own request id from.
        xargs.update(request_xargs(request, now_s, now_unix_s, key=key, request_id=call.request_id))
    if xargs:
        body["vllm_xargs"] = xargs
    else:
        body.pop("vllm_xargs", None)
    return body


def adds_usage(body: Mapping[str, Any]) -> bool:
    """True when the gateway asks the backend for the final usage chunk of a stream although the client did
    not (``stream_options.include_usage``); that chunk is then stripped from the client's stream. A
    malformed ``stream_options`` is forwarded untouched for vLLM to reject."""
    options = body.get("stream_options")
    return options is None or (isinstance(options, dict) and not options.get("include_usage"))


def vllm_priority(request: Request, mode: str) -> int:
    """Lower runs sooner in vLLM. ``deadline``: the absolute deadline in ms on the gateway clock (EDF in
    vLLM's waiting queue); ``job``: the job-level priority the job policy or header set."""
    if mode == "job":
        return round(request.priority)
    if not math.isfinite(request.deadline_s):
        return _NO_DEADLINE_PRIORITY
    return max(round(request.deadline_s * 1000.0), 0)


class TokenProgress(Protocol):
    """Where a stream's token count goes (the call's ``dispatch.queues.LiveSeq``): one sequence's progress
    of the ``sequences`` the call decodes side by side."""

    num_output_tokens: int
    first_token_s: float | None
    sequences: int


class StreamTokens:
    """Token accounting of one SSE stream: ``total`` counts data events as they pass (vLLM streams one event
    per generated token of any choice; the chat role event and a usage event make this an estimate within ~2
    tokens, and coalesced events under load make it undercount), replaced by the exact
    ``usage.completion_tokens`` of the final usage chunk as soon as the backend sends one. The queue entry
    ``seq`` sees one sequence's share of it (``per_sequence``): a call of ``n`` choices streams them
    interleaved, and its progress is how far each has come, not their sum.

    Only whole events are passed on (a partial one waits for its end; a client cannot use half an event),
    so an event split across reads is still seen whole. With ``strip_usage`` the usage-only event
    (``"choices": []``) is dropped: the gateway asked the backend for it, the client did not."""

    __slots__ = ("_clock", "_events", "_format", "_held", "_strip", "_usage", "done", "seq")

    def __init__(
        self, seq: TokenProgress, clock: Callable[[], float], strip_usage: bool, form: StreamFormat = OPENAI
    ) -> None:
        self.seq = seq
        self._clock = clock
        self._format = form
        self._strip = strip_usage and form.asks_usage
        self._held = b""
        self._events = 0
        self._usage: int | None = None
        self.done = False  # the backend's ``data: [DONE]`` went by: the stream ended whole

    def feed(self, chunk: bytes) -> bytes:
        """Account ``chunk``; returns the bytes to send to the client now (whole events only)."""
        data = self._held + chunk if self._held else chunk
        end = data.rfind(b"\n\n")
        if end >= 0:
            end += 2
        else:
            end = data.rfind(b"\r\n\r\n")
            if end < 0:
                self._held = data
                return b""
            end += 4
        if end == len(data):
            self._held = b""
            return self._account(data)
        self._held = data[end:]
        return self._account(data[:end])

    def flush(self) -> bytes:
        """The held tail at the end of the body (a body that is not SSE, or a last event without its
        blank line)."""
        held, self._held = self._held, b""
        return self._account(held) if held else b""

    def _account(self, block: bytes) -> bytes:
        form = self._format
        events = block.count(form.token_event)
        if not self.done and any(end in block for end in form.ends):
            self.done = True
        if b'"usage"' in block:
            if form.usage_event is None:
                block, events = self._read_usage(block, events)
            else:
                self._read_final_usage(block, form.usage_event)
        seq = self.seq
        if events:
            self._events += events
            if seq.first_token_s is None:
                seq.first_token_s = self._clock()
        seq.num_output_tokens = per_sequence(self.total, seq.sequences)
        return block

    @property
    def total(self) -> int:
        """Every sequence's output so far: the usage once the backend sent it, else the events counted."""
        return self._events if self._usage is None else self._usage

    def _read_usage(self, block: bytes, events: int) -> tuple[bytes, int]:
        """Take ``completion_tokens`` from usage events; a usage-only event is no token (and is dropped
        when stripping). Pieces that hold several events (unusual framing) are never dropped."""
        kept: list[bytes] = []
        for event in block.split(b"\n\n"):
            match = _COMPLETION_TOKENS.search(event) if b'"usage"' in event else None
            if match is not None:
                self._usage = int(match.group(1))
                if _EMPTY_CHOICES.search(event) and event.count(b"data:") == 1:
                    events -= event.count(OPENAI.token_event)
                    if self._strip:
                        continue
            kept.append(event)
        return b"\n\n".join(kept), events

    def _read_final_usage(self, block: bytes, marker: bytes) -> None:
        """The output count of the event ``marker`` names (its usage is the stream's last word); no event of
        such a stream is a token or is dropped."""
        for event in block.split(b"\n\n"):
            if marker in event and (match := self._format.usage.search(event)) is not None:
                self._usage = int(match.group(1))


def call_stream_tokens(call: Call, seq: TokenProgress, clock: Callable[[], float]) -> StreamTokens:
    """The token accounting of ``call``'s stream, in its route's format; the usage chunk the gateway asked
    for (``backend_body``) is stripped when the client did not ask for it."""
    return StreamTokens(seq, clock, adds_usage(call.body), stream_format(call.path))


def body_tokens(call: Call, body: bytes) -> int:
    """The output count of ``call``'s non-streamed response ``body``, in its route's format."""
    return usage_tokens(body, stream_format(call.path))


def json_bytes(value: Any) -> bytes:
    """JSON-encode (orjson: ~15x cheaper than ``json.dumps`` on this path); values orjson refuses
    (integers beyond 64 bits) fall back to the standard encoder."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value).encode()


def is_broken(error: BaseException) -> bool:
    """A failure that says the server is gone (not merely slow): mark the backend down."""
    return isinstance(error, UpstreamError) and not isinstance(error, UpstreamTimeoutError)


def close_response(response: UpstreamResponse, fully_read: bool) -> None:
    """Return a fully read connection to the pool; drop one cut short (its stream state is unknown)."""
    if fully_read:
        response.release()
    else:
        response.close()


def usage_tokens(body: bytes, form: StreamFormat = OPENAI) -> int:
    """The output count of a response body (OpenAI's ``usage.completion_tokens``, Anthropic's
    ``usage.output_tokens``; 0 when absent). A byte search, not a JSON parse: the body can be large
    (choices, logprobs) and this runs on every non-streamed call."""
    match = form.usage.search(body)
    return int(match.group(1)) if match else 0
