"""A call body's bytes to a JSON object, as the OpenAI routes and the job API read them: the media type
checked (415), nesting and integer literals bounded so that no input reaches the parser's recursion or
quadratic int conversion (each a 500 before), every refusal one 400 naming ``body``."""

from __future__ import annotations

import json
from typing import Any

import orjson

from slosched.gateway.calls.call import HttpError, bad_request

MAX_JSON_DEPTH = 64  # vLLM's bodies nest ~6 deep (messages, content parts, tool schemas)
MAX_INT_DIGITS = 32  # beyond every bounded field; Python's int() of a long literal is quadratic


def check_json_media_type(content_type: str | None) -> None:
    """A body declared as something other than JSON (a form, plain text) is refused with 415, as vLLM's
    own server refuses it; a body with no content-type is read as JSON (raw HTTP clients often omit it)."""
    if content_type is None:
        return
    media = content_type.partition(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise HttpError(
            415,
            "unsupported_media_type",
            f"header content-type: expected application/json, got {media[:64]!r}",
            param="content-type",
        )


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """A JSON object, nested at most ``MAX_JSON_DEPTH`` deep, integer literals at most ``MAX_INT_DIGITS``
    digits (the standard parser's RecursionError and int-conversion ValueError would otherwise be 500s)."""
    try:
        body = orjson.loads(raw)  # ~5x cheaper than json.loads on a typical call body
    except orjson.JSONDecodeError:
        # orjson refuses some inputs the standard parser accepts (NaN, huge integers, lone surrogates): the
        # standard parser decides, within the same bounds.
        try:
            body = json.loads(raw, parse_int=_bounded_int)
        except RecursionError:
            raise bad_request("body", f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
        except ValueError as error:  # JSONDecodeError and UnicodeDecodeError included
            raise bad_request("body", f"invalid JSON ({_reason(error)})") from None
    if not isinstance(body, dict):
        raise bad_request("body", f"expected a JSON object, got {type(body).__name__}")
    # Fewer brackets than the limit cannot nest deeper (two byte counts: the common case stops here).
    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH and not _shallow(body, MAX_JSON_DEPTH):
        raise bad_request("body", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return body


def _shallow(value: dict[str, Any] | list[Any], limit: int) -> bool:
    """Whether containers nest at most ``limit`` deep. Each container's element types are collected at C
    speed (``set(map(type, ...))``), so a long list of token ids costs no Python-level loop."""
    stack: list[tuple[dict[str, Any] | list[Any], int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        items = node.values() if type(node) is dict else node
        kinds = set(map(type, items))
        if list in kinds or dict in kinds:
            if depth >= limit:
                return False
            stack.extend((child, depth + 1) for child in items if type(child) is list or type(child) is dict)
    return True


def _bounded_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS + 1:  # + a sign
        raise _IntTooLongError
    return int(text)


class _IntTooLongError(ValueError):
    pass


def _reason(error: BaseException) -> str:
    if isinstance(error, _IntTooLongError):
        return f"an integer literal longer than {MAX_INT_DIGITS} digits"
    return error.__class__.__name__
