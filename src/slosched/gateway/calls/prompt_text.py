"""The text a model reads from a structured prompt (Anthropic's content blocks, the Responses API's input
items): what the gateway sizes a call by, as it sizes a chat by its messages' text.

Both APIs nest text in typed objects: a block's ``text`` or ``thinking``, a tool call's ``input`` (an object,
counted as its JSON) or ``arguments``, a tool result's ``content`` or ``output``, a reasoning item's
``summary``. Only the size matters here (4 characters a token), so every such field counts, in order, and
anything else (an image's base64 source, ids, types) does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from slosched.gateway.calls.call import CHAT, Call, SloHeaders, parse_call

TEXT_FIELDS = ("text", "thinking", "content", "input", "output", "arguments", "summary")
_MAX_DEPTH = 16  # the body's JSON is bounded at 64 levels; text nested deeper than this is not a prompt's


def prompt_text(value: Any, depth: int = 0) -> str:
    """The text of ``value``: a string, a list of items, or an object's text fields (an object under
    ``input`` counts as its JSON: a tool call's arguments)."""
    if isinstance(value, str):
        return value
    if depth >= _MAX_DEPTH:
        return ""
    if isinstance(value, list):
        return "".join(prompt_text(item, depth + 1) for item in value)
    if not isinstance(value, dict):
        return ""
    parts: list[str] = []
    for name in TEXT_FIELDS:
        field = value.get(name)
        if name == "input" and isinstance(field, dict):
            parts.append(_json(field))
        elif field is not None:
            parts.append(prompt_text(field, depth + 1))
    return "".join(parts)


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # integers past 64 bits: their size is what counts here
        return repr(value)


def as_chat_call(
    path: str,
    body: dict[str, Any],
    chat: dict[str, Any],
    slo: SloHeaders,
    now_s: float,
    default_max_tokens: int,
    models: Mapping[str, int] | None,
    ids: tuple[str, str | None] | None,
) -> Call:
    """The call of ``body`` at ``path`` read as the chat body ``chat`` of its text (``parse_call``: the model's
    length, the tenant's floors, the prefix blocks, the client's ``vllm_xargs`` checked as a chat's are),
    carrying the client's own body and route."""
    if "vllm_xargs" in body:
        chat = {**chat, "vllm_xargs": body["vllm_xargs"]}
    call = parse_call(CHAT, chat, slo, now_s, default_max_tokens, models, ids)
    call.path, call.body = path, body
    return call
