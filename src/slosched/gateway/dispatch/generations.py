"""The call of a generation route's body, one reading for the gateway's hot path and the endpoint picker: an
OpenAI completion or chat (``calls/call.py``), Anthropic's Messages (``calls/messages.py``), or OpenAI's
Responses, pinned to the backend that stored the response it continues (``response_owners.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slosched.gateway.backends.backend import Backend
from slosched.gateway.calls.call import Call, SloHeaders, parse_call
from slosched.gateway.calls.messages import MESSAGES, parse_messages_call
from slosched.gateway.calls.responses import RESPONSES, parse_responses_call
from slosched.gateway.dispatch.response_owners import ResponseOwners, pinned_backend


def generation_call(
    path: str,
    body: dict[str, Any],
    slo: SloHeaders,
    now_s: float,
    default_max_tokens: int,
    models: Mapping[str, int] | None,
    stored: tuple[ResponseOwners, Sequence[Backend]],
    ids: tuple[str, str | None] | None = None,
) -> Call:
    """The call of ``body`` at one of ``other_routes.GENERATION_PATHS``; ``stored``: who made which response,
    and the backends now served (a follow-up of a response is pinned where it lives, or a 404)."""
    if path == MESSAGES:
        return parse_messages_call(body, slo, now_s, models, ids)
    if path != RESPONSES:
        return parse_call(path, body, slo, now_s, default_max_tokens, models, ids)
    call = parse_responses_call(body, slo, now_s, default_max_tokens, models, ids)
    owners, backends = stored
    call.pinned = pinned_backend(owners, backends, body.get("previous_response_id"), slo.tenant)
    return call
