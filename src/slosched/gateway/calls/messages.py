"""Anthropic's Messages API (``POST /v1/messages``), as vLLM serves it, scheduled like a chat completion.

Clients written against Anthropic's SDK (coding agents among them) point at vLLM's ``/v1/messages``, which
vLLM translates to a chat completion inside the server. The gateway does the same for its own view: the
body is validated as vLLM's ``AnthropicMessagesRequest`` types it (``model``, ``max_tokens`` and
``messages`` required; content a string or a list of typed blocks), its text read into a chat call of the
same model, size and deadline, and the client's body forwarded untouched (plus the gateway's signed
``vllm_xargs``, which vLLM passes to the engine plugin). The response comes back as the backend sent it: a
JSON message, or Anthropic's event stream, whose tokens are counted by its own events
(``backends/forwarding.ANTHROPIC``). ``/v1/messages/count_tokens`` is forwarded whole as vLLM's other routes
are (``other_routes.py``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from slosched.gateway.calls.bodies import MAX_MESSAGES
from slosched.gateway.calls.call import CHAT, Call, HttpError, SloHeaders, bad_request, parse_call

MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"
_LOOSE = ConfigDict(strict=True, extra="allow")
_TEXT_FIELDS = ("text", "thinking", "content", "input")  # what a block's tokens are made of, by its type


class _Block(BaseModel):
    model_config = _LOOSE
    type: Annotated[StrictStr, Field(min_length=1)]


Content = StrictStr | Annotated[list[_Block], Field(max_length=MAX_MESSAGES)]


class _Message(BaseModel):
    model_config = _LOOSE
    role: Literal["user", "assistant", "system"]
    content: Content


class MessagesBody(BaseModel):
    """``POST /v1/messages``: the fields the gateway reads; the rest pass through to vLLM."""

    model_config = _LOOSE
    model: StrictStr
    max_tokens: Annotated[StrictInt, Field(ge=1)]
    messages: Annotated[list[_Message], Field(min_length=1, max_length=MAX_MESSAGES)]
    system: Content | None = None
    stream: StrictBool | None = None


_FIELD_NAMES = frozenset((*MessagesBody.model_fields, *_Message.model_fields, *_Block.model_fields))
_CONTENT_FIELDS = ("content", "system")


def parse_messages_call(
    body: dict[str, Any],
    slo: SloHeaders,
    now_s: float,
    models: dict[str, int] | None = None,
    ids: tuple[str, str | None] | None = None,
) -> Call:
    """The call of a Messages body: 400 naming the field for a body vLLM would refuse, then the chat call of
    its text (``parse_call``: the model's length, the tenant's floors, the prefix blocks), carrying the
    client's body and this route."""
    try:
        typed = MessagesBody.model_validate(body)
    except ValidationError as error:
        raise _bad_body(error) from None
    chat: list[dict[str, Any]] = [{"role": "system", "content": _text(typed.system)}] if typed.system else []
    chat.extend({"role": message.role, "content": _text(message.content)} for message in typed.messages)
    seen = {"model": typed.model, "messages": chat, "max_tokens": typed.max_tokens, "stream": bool(typed.stream)}
    if "vllm_xargs" in body:
        seen["vllm_xargs"] = body["vllm_xargs"]  # the client's own extra arguments, checked as a chat's are
    call = parse_call(CHAT, seen, slo, now_s, typed.max_tokens, models, ids)
    call.path, call.body = MESSAGES, body
    return call


def _bad_body(error: ValidationError) -> HttpError:
    """A 400 naming the deepest field the problems reach (``messages[0].content[1].type``), never echoing
    the input; a content that is neither form gets what both allow."""
    problems = error.errors(include_url=False, include_input=False)
    deepest = max(problems, key=lambda problem: len([part for part in problem["loc"] if _is_field(part)]))
    fields = [part for part in deepest["loc"] if _is_field(part)]
    # Named as the chat routes name theirs (``bodies._where``): ``messages[0].content``.
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in fields).lstrip(".")
    if fields and fields[-1] in _CONTENT_FIELDS:
        return bad_request(where, "expected a string or a list of blocks with a type")
    return bad_request(where or "body", str(deepest["msg"]))


def _is_field(part: int | str) -> bool:
    """A location's index or field name (not a union member's tag such as ``str`` or ``list[_Block]``)."""
    return isinstance(part, int) or part in _FIELD_NAMES


def _text(content: str | list[_Block] | None) -> str:
    """The text a model reads from ``content``: a string, or its blocks' text, thinking, tool input and tool
    results (JSON where they are not text), in order."""
    if content is None or isinstance(content, str):
        return content or ""
    parts: list[str] = []
    for block in content:
        extra = block.model_extra or {}
        for name in _TEXT_FIELDS:
            value = extra.get(name)
            if isinstance(value, str):
                parts.append(value)
            elif isinstance(value, list) and name == "content":
                parts.append(_text([_Block.model_validate(item) for item in value if _is_block(item)]))
            elif value is not None:
                parts.append(_json(value))
    return "".join(parts)


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # integers past 64 bits: their size is what counts here
        return repr(value)


def _is_block(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("type"), str) and bool(item["type"])
