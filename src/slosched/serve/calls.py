"""Parsing and validation of OpenAI-style calls into ``Call`` objects (a ``Request`` + the body to forward).

Validation covers what the gateway itself relies on (JSON object, prompt/messages shape, ``max_tokens``,
``stream``, SLO headers); every other field passes through to vLLM, which answers its own 400s. Every
problem raises ``HttpError`` with a 4xx status naming the field, never an unhandled exception.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from slosched.contract import (
    HEADER_DEADLINE_MS,
    HEADER_JOB_ID,
    HEADER_JOB_STAGE,
    HEADER_PRIORITY,
    HEADER_TENANT,
    HEADER_TPOT_MS,
    HEADER_TTFT_MS,
    SLO_HEADERS,
)
from slosched.core.request import Request

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
_CHARS_PER_TOKEN = 4  # a byte-level BPE averages ~4 characters per token on English text
_MAX_HEADER_MS = 1e9  # ~11 days: anything larger is a client bug, not an SLO


class HttpError(Exception):
    """An error answered to the client: status, machine-readable code, message, optional Retry-After."""

    def __init__(self, status: int, code: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s


def bad_request(field_name: str, message: str) -> HttpError:
    return HttpError(400, "invalid_request", f"{field_name}: {message}")


@dataclass(slots=True)
class Call:
    """One OpenAI call on its way through the gateway. ``body`` is forwarded (plus policy metadata)."""

    path: str
    body: dict[str, Any]
    stream: bool
    request: Request
    headers: dict[str, str] = field(default_factory=dict)
    outcome: str | None = None  # set exactly once, by Dispatcher.finish
    reason: str = ""
    backend: str | None = None
    first_token_s: float | None = None
    finish_s: float | None = None
    output_tokens: int = 0
    attempts: int = 0


_ids = itertools.count()


def next_request_id(prefix: str = "req") -> str:
    return f"{prefix}-{next(_ids)}"


def parse_json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)  # ~5x cheaper than json.loads on a typical call body
    except orjson.JSONDecodeError:
        # orjson refuses some inputs the standard parser accepts (NaN, integers beyond 64 bits, lone
        # surrogates): the standard parser decides, so the set of accepted bodies is unchanged.
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise bad_request("body", f"invalid JSON ({error.__class__.__name__})") from error
    if not isinstance(body, dict):
        raise bad_request("body", f"expected a JSON object, got {type(body).__name__}")
    return body


def _header_ms(headers: Mapping[str, str], name: str) -> float | None:
    text = headers.get(name)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError as error:
        raise bad_request(f"header {name}", f"expected milliseconds (a number > 0), got {text!r}") from error
    if not (math.isfinite(value) and 0 < value <= _MAX_HEADER_MS):
        raise bad_request(f"header {name}", f"expected milliseconds in (0, {_MAX_HEADER_MS:.0f}], got {text!r}")
    return value


def _prompt_tokens_completions(prompt: Any) -> int:
    """Token estimate of a completions prompt: a string, token ids, or a batch of either."""
    if isinstance(prompt, str):
        return max(len(prompt) // _CHARS_PER_TOKEN, 1)
    if isinstance(prompt, list) and prompt:
        if all(isinstance(item, int) and not isinstance(item, bool) for item in prompt):
            return len(prompt)
        if all(isinstance(item, str) for item in prompt):
            return sum(max(len(item) // _CHARS_PER_TOKEN, 1) for item in prompt)
        if all(isinstance(item, list) and item and all(isinstance(t, int) for t in item) for item in prompt):
            return sum(len(item) for item in prompt)
    raise bad_request("prompt", "expected a non-empty string, list of strings, or list of token ids")


def _prompt_tokens_chat(messages: Any) -> int:
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages", "expected a non-empty list of {role, content} objects")
    chars = 0
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise bad_request(f"messages[{index}]", "expected an object with a string 'role'")
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    raise bad_request(f"messages[{index}].content", "expected a string or a list of parts")
                text = part.get("text")
                chars += len(text) if isinstance(text, str) else 0
        elif content is not None:
            raise bad_request(f"messages[{index}].content", "expected a string, a list of parts, or null")
    return max(chars // _CHARS_PER_TOKEN, 1) + 4 * len(messages)  # + chat-template tokens per message


def _max_tokens(body: Mapping[str, Any], default: int) -> int:
    for name in ("max_tokens", "max_completion_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise bad_request(name, f"expected an integer >= 1, got {value!r}")
        return value
    return default


@dataclass(slots=True, frozen=True)
class SloHeaders:
    """Per-request SLO and identity metadata from headers (all optional)."""

    deadline_ms: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    tenant: str = "default"
    priority: float = 0.0
    job_id: str | None = None
    stage: str | None = None


_NO_SLO = SloHeaders()


def parse_slo_headers(headers: Mapping[str, str]) -> SloHeaders:
    if SLO_HEADERS.isdisjoint(headers):
        return _NO_SLO  # the common case: no SLO metadata (and a frozen dataclass costs ~3 us to build)
    tenant = headers.get(HEADER_TENANT, "default")
    if not tenant or len(tenant) > 128:
        raise bad_request(f"header {HEADER_TENANT}", "expected 1..128 characters")
    priority_text = headers.get(HEADER_PRIORITY, "0")
    try:
        priority = float(priority_text)
    except ValueError as error:
        raise bad_request(f"header {HEADER_PRIORITY}", f"expected a number, got {priority_text!r}") from error
    if not math.isfinite(priority):
        raise bad_request(f"header {HEADER_PRIORITY}", f"expected a finite number, got {priority_text!r}")
    return SloHeaders(
        deadline_ms=_header_ms(headers, HEADER_DEADLINE_MS),
        ttft_ms=_header_ms(headers, HEADER_TTFT_MS),
        tpot_ms=_header_ms(headers, HEADER_TPOT_MS),
        tenant=tenant,
        priority=priority,
        job_id=headers.get(HEADER_JOB_ID),
        stage=headers.get(HEADER_JOB_STAGE),
    )


def parse_call(path: str, body: dict[str, Any], slo: SloHeaders, now_s: float, default_max_tokens: int) -> Call:
    """Validate ``body`` for ``path`` and build the ``Request`` the policies will see."""
    if path == CHAT:
        prompt_tokens = _prompt_tokens_chat(body.get("messages"))
    else:
        prompt_tokens = _prompt_tokens_completions(body.get("prompt"))
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad_request("stream", f"expected true or false, got {stream!r}")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad_request("model", f"expected a string, got {model!r}")
    max_tokens = _max_tokens(body, default_max_tokens)
    request_id = next_request_id()
    request = Request(
        id=request_id,
        job_id=slo.job_id or request_id,
        stage=slo.stage or ("chat" if path == CHAT else "completion"),
        template="chat" if path == CHAT else "completion",
        prompt_tokens=prompt_tokens,
        max_output_tokens=max_tokens,
        arrival_s=now_s,
        job_arrival_s=now_s,
        deadline_s=now_s + slo.deadline_ms / 1000.0 if slo.deadline_ms is not None else math.inf,
        tenant=slo.tenant,
        priority=slo.priority,
        ttft_slo_s=slo.ttft_ms / 1000.0 if slo.ttft_ms is not None else None,
        tpot_slo_s=slo.tpot_ms / 1000.0 if slo.tpot_ms is not None else None,
    )
    return Call(path=path, body=body, stream=stream, request=request)
