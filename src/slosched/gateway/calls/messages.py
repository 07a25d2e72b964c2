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

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StrictBool, StrictInt, StrictStr, ValidationError

from slosched.gateway.calls.bodies import LOOSE, MAX_MESSAGES, deepest_error
from slosched.gateway.calls.call import Call, HttpError, SloHeaders, bad_request
from slosched.gateway.calls.prompt_text import as_chat_call, prompt_text

MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"


class _Block(BaseModel):
    model_config = LOOSE
    type: Annotated[StrictStr, Field(min_length=1)]


Content = StrictStr | Annotated[list[_Block], Field(max_length=MAX_MESSAGES)]


class _Message(BaseModel):
    model_config = LOOSE
    role: Literal["user", "assistant", "system"]
    content: Content


class MessagesBody(BaseModel):
    """``POST /v1/messages``: the fields the gateway reads; the rest pass through to vLLM."""

    model_config = LOOSE
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
    models: Mapping[str, int] | None = None,
    ids: tuple[str, str | None] | None = None,
) -> Call:
    """The call of a Messages body: 400 naming the field for a body vLLM would refuse, then the chat call of
    its text (``parse_call``: the model's length, the tenant's floors, the prefix blocks), carrying the
    client's body and this route."""
    try:
        typed = MessagesBody.model_validate(body)
    except ValidationError as error:
        raise _bad_body(error) from None
    # The text as the model reads it (validated above: the raw body has the typed shape).
    chat: list[dict[str, Any]] = [{"role": "system", "content": prompt_text(body["system"])}] if typed.system else []
    chat.extend({"role": message["role"], "content": prompt_text(message["content"])} for message in body["messages"])
    seen = {"model": typed.model, "messages": chat, "max_tokens": typed.max_tokens, "stream": bool(typed.stream)}
    return as_chat_call(MESSAGES, body, seen, slo, now_s, typed.max_tokens, models, ids)


def _bad_body(error: ValidationError) -> HttpError:
    """A 400 naming the deepest field the problems reach (``messages[0].content[1].type``), never echoing
    the input; a content that is neither form gets what both allow."""
    where, message = deepest_error(error, _FIELD_NAMES)
    if where.endswith(_CONTENT_FIELDS):
        return bad_request(where, "expected a string or a list of blocks with a type")
    return bad_request(where, message)
