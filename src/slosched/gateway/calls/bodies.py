"""Strict schemas of the OpenAI call bodies, as vLLM's own OpenAI server types them.

Known fields are typed and bounded (strict types: ``"5"`` or ``1e8`` is not an integer, as in the JSON
schema of the OpenAI API); unknown fields pass through untouched for vLLM to read (``extra="allow"``: vLLM
has many sampling extensions, and the gateway must not lag behind its version). The body forwarded to vLLM
is always the client's own dict: validation only decides whether the call is accepted.

Bounds (vLLM's, or OpenAI's where vLLM has none and an unbounded value is only ever a client bug):
``n`` 1..16 and ``best_of`` 1..16 (vLLM fans a call out into ``n`` sequences; 16 keeps one call from
occupying a whole batch), ``temperature`` 0..2, ``top_p`` (0, 1], ``min_p`` [0, 1], ``top_k`` >= -1,
presence/frequency penalties -2..2, ``repetition_penalty`` (0, 2], ``seed`` a signed 64-bit integer,
``logprobs``/``top_logprobs`` 0..20 (vLLM's default ``max_logprobs``), ``stop`` at most 16 strings,
prompts at most 1,024 per batch and token ids in [0, 2**31).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

MAX_N = 16
MAX_LOGPROBS = 20
MAX_BATCH = 1024
MAX_STOP = 16
MAX_MESSAGES = 4096
_MAX_TOKEN_ID = 2**31 - 1
_INT64 = 2**63

# Known fields strict, unknown ones passed through for vLLM (the Messages and Responses bodies use it too).
LOOSE = ConfigDict(strict=True, extra="allow")
TokenId = Annotated[StrictInt, Field(ge=0, le=_MAX_TOKEN_ID)]
TokenIds = Annotated[list[TokenId], Field(min_length=1)]
NonEmptyText = Annotated[StrictStr, Field(min_length=1)]
Prompt = (
    NonEmptyText
    | Annotated[list[NonEmptyText], Field(min_length=1, max_length=MAX_BATCH)]
    | TokenIds
    | Annotated[list[TokenIds], Field(min_length=1, max_length=MAX_BATCH)]
)
Stop = StrictStr | Annotated[list[StrictStr], Field(max_length=MAX_STOP)] | None
Penalty = Annotated[float, Field(ge=-2.0, le=2.0)] | None


class StreamOptions(BaseModel):
    model_config = LOOSE
    include_usage: StrictBool | None = None
    continuous_usage_stats: StrictBool | None = None


class _Sampling(BaseModel):
    """Fields both routes share."""

    model_config = LOOSE
    model: StrictStr | None = None
    max_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    n: Annotated[StrictInt, Field(ge=1, le=MAX_N)] | None = None
    best_of: Annotated[StrictInt, Field(ge=1, le=MAX_N)] | None = None
    stream: StrictBool | None = None
    stream_options: StreamOptions | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    min_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    top_k: Annotated[StrictInt, Field(ge=-1)] | None = None
    presence_penalty: Penalty = None
    frequency_penalty: Penalty = None
    repetition_penalty: Annotated[float, Field(gt=0.0, le=2.0)] | None = None
    seed: Annotated[StrictInt, Field(ge=-_INT64, lt=_INT64)] | None = None
    stop: Stop = None
    min_tokens: Annotated[StrictInt, Field(ge=0)] | None = None
    user: StrictStr | None = None


class CompletionBody(_Sampling):
    """``POST /v1/completions``."""

    prompt: Prompt
    logprobs: Annotated[StrictInt, Field(ge=0, le=MAX_LOGPROBS)] | None = None
    echo: StrictBool | None = None
    suffix: StrictStr | None = None


class ContentPart(BaseModel):
    model_config = LOOSE
    type: NonEmptyText
    text: StrictStr | None = None


class Message(BaseModel):
    model_config = LOOSE
    # Any role: vLLM passes custom roles (``ipython``, ``environment``) to the model's chat template.
    role: Annotated[StrictStr, Field(min_length=1, max_length=64)]
    content: StrictStr | Annotated[list[ContentPart], Field(max_length=MAX_MESSAGES)] | None = None
    name: StrictStr | None = None


class ChatBody(_Sampling):
    """``POST /v1/chat/completions``."""

    messages: Annotated[list[Message], Field(min_length=1, max_length=MAX_MESSAGES)]
    max_completion_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    logprobs: StrictBool | None = None
    top_logprobs: Annotated[StrictInt, Field(ge=0, le=MAX_LOGPROBS)] | None = None


_HINTS = {
    "prompt": "expected a non-empty string, a list of non-empty strings, a list of token ids (integers in "
    f"[0, 2**31)) or a list of such lists (at most {MAX_BATCH} prompts)",
    "stop": f"expected a string or a list of at most {MAX_STOP} strings",
    "content": "expected a string, a list of {type, text} parts, or null",
}


def _known_fields() -> frozenset[str]:
    names: set[str] = set()
    for model in (CompletionBody, ChatBody, Message, ContentPart, StreamOptions):
        names.update(model.model_fields)
    return frozenset(names)


_KNOWN = _known_fields()


def _where(loc: tuple[int | str, ...]) -> tuple[str, str | None]:
    """``('messages', 0, 'role')`` -> ``messages[0].role``. A segment that names no field is a union member's
    tag (``'str'``, ``'list[constrained-int]'``): the location is cut there and the field's hint returned."""
    text, last = "", ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in _KNOWN:
            text += f".{part}" if text else part
            last = part
        else:
            return text or "body", _HINTS.get(last, "invalid value")
    return text or "body", None


def first_error(error: ValidationError) -> tuple[str, str]:
    """(field, message) of the first problem, never echoing the input value itself."""
    first = error.errors(include_url=False, include_input=False)[0]
    field, hint = _where(first["loc"])
    return field, hint if hint is not None else str(first["msg"])


def deepest_error(error: ValidationError, field_names: frozenset[str]) -> tuple[str, str]:
    """(field, message) of the problem whose location reaches deepest into ``field_names`` (a union's
    members each report theirs: the deepest is the one the client came closest to), named as ``_where``
    names fields (``messages[0].content[1].type``), never echoing the input."""
    problems = error.errors(include_url=False, include_input=False)

    def fields(problem: Any) -> list[int | str]:
        return [part for part in problem["loc"] if isinstance(part, int) or part in field_names]

    deepest = max(problems, key=lambda problem: len(fields(problem)))
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in fields(deepest)).lstrip(".")
    return where or "body", str(deepest["msg"])


def validate_body(chat: bool, body: dict[str, Any]) -> CompletionBody | ChatBody:
    """The typed view of ``body``; raises ``ValidationError`` (see ``first_error``)."""
    return ChatBody.model_validate(body) if chat else CompletionBody.model_validate(body)
