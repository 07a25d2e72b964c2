"""OpenAI's Responses API (``POST /v1/responses``) as vLLM serves it, scheduled like a chat completion.

The body is validated as vLLM's ``ResponsesRequest`` types the fields the gateway reads (``input``
required: a string or a list of items; ``instructions``, ``max_output_tokens``, ``stream``,
``previous_response_id``), its text read into a chat call of the same model, size and deadline, and the
client's body forwarded untouched (plus ``priority`` and the signed ``vllm_xargs``, which vLLM's request
takes). Unlike a chat, a response lives on the server that made it (``store`` defaults to true): a
follow-up names it (``previous_response_id``), and ``GET /v1/responses/{id}`` and ``POST .../cancel``
read or stop it there, so the gateway remembers which backend made each response and for which tenant
(``dispatch/response_owners.py``) and sends those there (``Call.pinned``). ``background: true`` is refused:
its generation would run on the server after the call returns, outside the gateway's queues and deadlines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, Field, StrictBool, StrictInt, StrictStr, ValidationError

from slosched.gateway.calls.bodies import LOOSE, MAX_MESSAGES, deepest_error
from slosched.gateway.calls.call import Call, HttpError, SloHeaders, bad_request
from slosched.gateway.calls.prompt_text import as_chat_call, prompt_text

RESPONSES = "/v1/responses"
RESPONSE_ID_CHARS = 256  # an id the gateway keeps (vLLM's are ``resp_`` and 32 hex digits)


class ResponsesBody(BaseModel):
    """``POST /v1/responses``: the fields the gateway reads; the rest pass through to vLLM."""

    model_config = LOOSE
    model: StrictStr | None = None
    input: (
        Annotated[StrictStr, Field(min_length=1)]
        | Annotated[list[dict[str, Any]], Field(min_length=1, max_length=MAX_MESSAGES)]
    )
    instructions: StrictStr | None = None
    max_output_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    stream: StrictBool | None = None
    previous_response_id: Annotated[StrictStr, Field(min_length=1, max_length=RESPONSE_ID_CHARS)] | None = None
    background: StrictBool | None = None


_FIELD_NAMES = frozenset(ResponsesBody.model_fields)


def parse_responses_call(
    body: dict[str, Any],
    slo: SloHeaders,
    now_s: float,
    default_max_tokens: int,
    models: Mapping[str, int] | None = None,
    ids: tuple[str, str | None] | None = None,
) -> Call:
    """The call of a Responses body: 400 naming the field for a body vLLM would refuse (or a background
    one), then the chat call of its text (``parse_call``), carrying the client's body and this route. Its
    ``pinned`` backend is the caller's to set (the owner of ``previous_response_id``)."""
    try:
        typed = ResponsesBody.model_validate(body)
    except ValidationError as error:
        raise bad_request(*deepest_error(error, _FIELD_NAMES)) from None
    if typed.background:
        raise bad_request("background", "not served through the gateway: it would generate outside its queues")
    chat: list[dict[str, Any]] = [{"role": "system", "content": typed.instructions}] if typed.instructions else []
    chat.append({"role": "user", "content": prompt_text(body["input"])})
    seen: dict[str, Any] = {"messages": chat, "stream": bool(typed.stream)}
    if typed.model is not None:
        seen["model"] = typed.model
    if typed.max_output_tokens is not None:
        seen["max_tokens"] = typed.max_output_tokens
    try:
        return as_chat_call(RESPONSES, body, seen, slo, now_s, default_max_tokens, models, ids)
    except HttpError as error:
        if error.param == "max_tokens":  # named as the client named it
            raise bad_request("max_output_tokens", error.message.removeprefix("max_tokens: ")) from None
        raise


def stored(call: Call) -> bool:
    """A Responses call whose response the server keeps (``store`` defaults to true): its id is worth keeping."""
    return call.path == RESPONSES and call.body.get("store") is not False
