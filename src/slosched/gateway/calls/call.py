"""Parsing and validation of OpenAI-style calls into ``Call`` objects (a ``Request`` + the body to forward).

The JSON is bounded before it is parsed (nesting depth, integer literal length); the known fields of a body
are typed and bounded as vLLM's OpenAI server types them (``bodies.py``), the model must be served, and the
call must fit its ``max_model_len``; unknown fields pass through to vLLM. Every problem raises
``HttpError`` with a 4xx status naming the field, never an unhandled exception, never echoing long input.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from slosched.contract import (
    HEADER_DEADLINE_MS,
    HEADER_IF_INFEASIBLE,
    HEADER_JOB_ID,
    HEADER_JOB_STAGE,
    HEADER_PRIORITY,
    HEADER_TENANT,
    HEADER_TPOT_MS,
    HEADER_TTFT_MS,
    IF_INFEASIBLE,
    SLO_HEADERS,
    reserved_xarg,
)
from slosched.core.deadline import absolute_deadline_s
from slosched.core.request import Request
from slosched.gateway.calls.bodies import ChatBody, CompletionBody, first_error, validate_body
from slosched.gateway.calls.prompt_blocks import CHARS_PER_TOKEN, chat_block_hashes, completion_block_hashes

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
_MAX_CHARS_PER_TOKEN = 8  # hardly any text averages more characters per token: a lower bound
_MAX_HEADER_MS = 1e9  # ~11 days: anything larger is a client bug, not an SLO
_ECHO_CHARS = 64  # user input quoted back in an error is cut to this many characters


class HttpError(Exception):
    """An error answered to the client: status, machine-readable code, message, optional Retry-After, and
    the request field at fault (OpenAI's ``param``) where there is one."""

    def __init__(
        self, status: int, code: str, message: str, retry_after_s: float | None = None, param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s
        self.param = param


def error_document(error: HttpError) -> dict[str, Any]:
    """The OpenAI-style JSON error answered for ``error`` (by the gateway, and by the picker through Envoy)."""
    details: dict[str, object] = {"message": error.message, "type": error.code, "code": error.status}
    if error.param is not None:
        details["param"] = error.param  # the request field at fault, as OpenAI names it
    return {"error": details}


def retry_after_header(error: HttpError) -> str | None:
    """The Retry-After value (whole seconds, at least 1) of ``error``; None when it suggests none."""
    if error.retry_after_s is None:
        return None
    return str(max(int(error.retry_after_s + 0.999), 1))


def bad_request(field_name: str, message: str) -> HttpError:
    return HttpError(400, "invalid_request", f"{field_name}: {message}", param=field_name)


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
    model: str | None = None  # None: any served model (vLLM's default model)
    output_hint: float | None = None  # the client's output-length prior (a dialect's); None: the predictor's
    # Set by the dispatcher while the call waits in a queue: takes it out (its client left) before admission.
    withdraw: Callable[[], None] | None = None
    client_id: str | None = None  # the client's X-Request-Id (validated); None: it sent none usable
    pinned: str | None = None  # the only backend that may serve it (a follow-up of a response stored there)
    # The sequences the engine generates for the call: its prompts (a completions batch) times ``n``. The
    # request is one of them, the longest prompt's; what the call costs (a tenant's tokens) and what it
    # teaches (output per sequence) count them all.
    sequences: int = 1
    prompt_tokens_total: int = 0  # every prompt's estimate (0: the request's own)

    @property
    def prefill_tokens(self) -> int:
        """Every prompt the engine prefills for the call (its own when it sent one)."""
        return max(self.prompt_tokens_total, self.request.prompt_tokens)

    @property
    def token_cost(self) -> int:
        """Tokens the call may take of its tenant's rate: every prompt and ``max_tokens`` per sequence."""
        return self.prefill_tokens + self.sequences * self.request.max_output_tokens

    @property
    def request_id(self) -> str:
        """The id the client sees (X-Request-Id), the backend gets and logs and /status show: the client's
        own, else the gateway's. ``request.id`` stays the gateway's, unique, for the policies' bookkeeping."""
        return self.request.id if self.client_id is None else self.client_id

    def client_gone(self) -> None:
        """The client left: a queued call leaves its queue now, so a slot freed in the same instant (another
        client leaving) cannot go to it; the caller then cancels the call's task."""
        if self.withdraw is not None:
            self.withdraw()


def per_sequence(output_tokens: int, sequences: int) -> int:
    """One sequence's share of a call's output (``Call.sequences`` decode side by side): what a finished call
    teaches the output-length and step-time beliefs, which model one sequence."""
    return output_tokens if sequences <= 1 or output_tokens <= 0 else max(round(output_tokens / sequences), 1)


# A client's X-Request-Id: what vLLM and log search take safely (no spaces, quotes or separators).
_CLIENT_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def next_request_id(prefix: str = "req") -> str:
    """A new gateway id. Random, not a counter: a client that picks ids (``X-Request-Id``) cannot claim
    one the gateway is about to hand another client, so ids stay unique at the backend too."""
    return f"{prefix}-{os.urandom(8).hex()}"


def client_request_id(value: str | None) -> str | None:
    """The client's ``X-Request-Id`` when it is 1-128 characters of letters, digits and ``._:-``; None (a
    generated id is used instead) when absent or not."""
    return value if value is not None and _CLIENT_ID.fullmatch(value) else None


def _header_ms(headers: Mapping[str, str], name: str) -> float | None:
    text = headers.get(name)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError as error:
        raise bad_request(f"header {name}", f"expected milliseconds (a number > 0), got {_short(text)!r}") from error
    if not (math.isfinite(value) and 0 < value <= _MAX_HEADER_MS):
        raise bad_request(f"header {name}", f"expected milliseconds in (0, {_MAX_HEADER_MS:.0f}], got {_short(text)!r}")
    return value


def _text_prompts(prompt: Any) -> list[tuple[int, int]]:
    """(characters, exact token count) of each prompt of a validated completions ``prompt`` (a string, a
    batch of strings, token ids or a batch of them); one of the two is 0."""
    if isinstance(prompt, str):
        return [(len(prompt), 0)]
    if isinstance(prompt[0], str):
        return [(len(item), 0) for item in prompt]
    if isinstance(prompt[0], int):
        return [(0, len(prompt))]
    return [(0, len(item)) for item in prompt]


def _chat_chars(messages: list[dict[str, Any]]) -> int:
    chars = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                text = part.get("text")
                chars += len(text) if isinstance(text, str) else 0
    return chars


def _bad_body(error: ValidationError) -> HttpError:
    field_name, message = first_error(error)
    return bad_request(field_name, message)


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
    reject_infeasible: bool = False  # x-slo-if-infeasible: reject (an early "cannot meet deadline")
    # From another stack's request fields (``calls/dialects``), below the headers above in precedence:
    dialect: str | None = None  # which stack's fields gave the job-level hints below
    deadline_from_job: bool = False  # deadline_ms counts from the job's first call, not this one's arrival
    program_id: str | None = None  # KV-affinity key; with parent_id, resolves the job when job_id is None
    parent_id: str | None = None
    output_tokens: float | None = None  # the client's output-length prior for this call
    kv_retention_s: float | None = None


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
        raise bad_request(f"header {HEADER_PRIORITY}", f"expected a number, got {_short(priority_text)!r}") from error
    if not math.isfinite(priority):
        raise bad_request(f"header {HEADER_PRIORITY}", f"expected a finite number, got {_short(priority_text)!r}")
    return SloHeaders(
        deadline_ms=_header_ms(headers, HEADER_DEADLINE_MS),
        ttft_ms=_header_ms(headers, HEADER_TTFT_MS),
        tpot_ms=_header_ms(headers, HEADER_TPOT_MS),
        tenant=tenant,
        priority=priority,
        job_id=_short_header(headers, HEADER_JOB_ID),
        stage=_short_header(headers, HEADER_JOB_STAGE),
        reject_infeasible=_if_infeasible(headers) == "reject",
    )


def _if_infeasible(headers: Mapping[str, str]) -> str:
    value = headers.get(HEADER_IF_INFEASIBLE, IF_INFEASIBLE[0])
    if value not in IF_INFEASIBLE:
        raise bad_request(f"header {HEADER_IF_INFEASIBLE}", f"got {_short(value)!r}; allowed: {list(IF_INFEASIBLE)}")
    return value


_MAX_NAME_CHARS = 128


def _short_header(headers: Mapping[str, str], name: str) -> str | None:
    """Job ids and stage names key learned state (the output-length predictor learns per stage): a bound
    on their length keeps that state small whatever a client sends."""
    value = headers.get(name)
    if value is not None and not 0 < len(value) <= _MAX_NAME_CHARS:
        raise bad_request(f"header {name}", f"expected 1..{_MAX_NAME_CHARS} characters, got {len(value)}")
    return value


def parse_call(
    path: str,
    body: dict[str, Any],
    slo: SloHeaders,
    now_s: float,
    default_max_tokens: int,
    models: Mapping[str, int] | None = None,
    ids: tuple[str, str | None] | None = None,
) -> Call:
    """Validate ``body`` for ``path`` (``bodies.py``) and build the ``Request`` the policies will see.
    ``ids``: the gateway's id and the client's X-Request-Id as the HTTP layer echoes them (default: new).

    ``models`` maps each served model to the largest ``max_model_len`` among its backends: an unknown
    ``model`` is a 404, and a call that cannot fit any of them a 400 naming the field and the limit."""
    chat = path == CHAT
    typed = _typed_body(chat, body)
    asked = _asked(typed, body)
    chars, exact, prompt_tokens, max_tokens, field_name = (
        asked.longest_chars,
        asked.longest_exact,
        asked.prompt_tokens,
        asked.max_tokens,
        asked.field_name,
    )
    model = typed.model
    if models is not None:
        # The least the prompt can be: exact token ids, or at most one token per 8 characters of text
        # (~4 on average): only a call vLLM would surely refuse is refused here.
        limit = _check_model(model, models, exact or chars // _MAX_CHARS_PER_TOKEN, max_tokens, field_name)
        if not exact and prompt_tokens >= limit:
            # The estimate (4 characters a token) must not refuse at routing what the bound let through:
            # vLLM, which counts exactly, decides.
            prompt_tokens = limit - 1
    request_id, client_id = (next_request_id(), None) if ids is None else ids
    request = Request(
        id=request_id,
        job_id=slo.job_id or request_id,
        stage=slo.stage or ("chat" if chat else "completion"),
        template="chat" if chat else "completion",
        prompt_tokens=prompt_tokens,
        max_output_tokens=max_tokens if max_tokens is not None else default_max_tokens,
        arrival_s=now_s,
        job_arrival_s=now_s,
        deadline_s=absolute_deadline_s(now_s, None if slo.deadline_ms is None else slo.deadline_ms / 1000.0),
        tenant=slo.tenant,
        priority=slo.priority,
        ttft_slo_s=slo.ttft_ms / 1000.0 if slo.ttft_ms is not None else None,
        tpot_slo_s=slo.tpot_ms / 1000.0 if slo.tpot_ms is not None else None,
        session_id=slo.program_id,
        prompt_block_hashes=asked.block_hashes,
    )
    stream = bool(typed.stream)
    call = Call(path, body, stream, request, model=model, output_hint=slo.output_tokens, client_id=client_id)
    call.sequences = asked.prompts * max(typed.n or 1, typed.best_of or 1)
    call.prompt_tokens_total = asked.total_tokens
    return call


@dataclass(frozen=True, slots=True)
class _Asked:
    """What a validated body asks of the engine: its longest prompt (characters or exact token ids; the
    call's request), every prompt's token estimate, how many prompts, and its output limit."""

    longest_chars: int
    longest_exact: int
    prompt_tokens: int
    total_tokens: int
    prompts: int
    max_tokens: int | None
    field_name: str
    block_hashes: tuple[int, ...]


def _asked(typed: CompletionBody | ChatBody, body: dict[str, Any]) -> _Asked:
    if isinstance(typed, ChatBody):
        chars = _chat_chars(body["messages"])
        prompt_tokens = max(chars // CHARS_PER_TOKEN, 1) + 4 * len(typed.messages)  # + template tokens
        field_name = "max_tokens" if typed.max_tokens is not None else "max_completion_tokens"
        max_tokens = typed.max_tokens if typed.max_tokens is not None else typed.max_completion_tokens
        hashes = chat_block_hashes(typed.model, body["messages"])
        return _Asked(chars, 0, prompt_tokens, prompt_tokens, 1, max_tokens, field_name, hashes)
    # A batch of prompts is that many sequences, each held to the model's length on its own (vLLM's rule):
    # the longest is the call's request, the sum is its cost.
    prompts = _text_prompts(typed.prompt)
    chars, exact = max(prompts, key=sum)  # a batch is all text or all token ids: one of the two counts
    total = sum(ids or max(text // CHARS_PER_TOKEN, 1) for text, ids in prompts)
    hashes = completion_block_hashes(typed.model, typed.prompt)
    prompt_tokens = exact or max(chars // CHARS_PER_TOKEN, 1)
    return _Asked(chars, exact, prompt_tokens, total, len(prompts), typed.max_tokens, "max_tokens", hashes)


def _typed_body(chat: bool, body: dict[str, Any]) -> CompletionBody | ChatBody:
    """``body`` validated (``bodies.py``); a client's ``slosched_*`` extra argument refused first."""
    if (reserved := reserved_xarg(body.get("vllm_xargs"))) is not None:
        raise bad_request(
            f"vllm_xargs.{_short(reserved)}",
            "slosched_* fields are the gateway's to set (from the API key's tenant and the x-slo-* headers)",
        )
    try:
        return validate_body(chat, body)
    except ValidationError as error:
        raise _bad_body(error) from None


def _check_model(
    model: str | None, models: Mapping[str, int], min_prompt_tokens: int, max_tokens: int | None, field_name: str
) -> int:
    """The model's ``max_model_len``; 404 for a model not served, 400 for a call that cannot fit it."""
    if model is None:
        limit = max(models.values())
    else:
        found = models.get(model)
        if found is None:
            raise model_not_found(model, models)
        limit = found
    if max_tokens is not None and min_prompt_tokens + max_tokens > limit:
        raise bad_request(
            field_name,
            f"{max_tokens} output tokens + a prompt of at least {min_prompt_tokens} tokens exceed the "
            f"model's max_model_len of {limit}",
        )
    return limit


def model_not_found(model: str, models: Mapping[str, int]) -> HttpError:
    names = sorted(models)
    served = ", ".join(names) if len(names) <= 8 else f"{len(names)} models (GET /v1/models)"
    message = f"model: {_short(model)!r} is not served here; served: {served}"
    return HttpError(404, "model_not_found", message, param="model")


def _short(text: str) -> str:
    return text if len(text) <= _ECHO_CHARS else text[:_ECHO_CHARS] + "..."
