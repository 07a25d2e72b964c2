"""``X-Request-Id`` on every HTTP exchange: the client's (when usable) or a new one, echoed on every
response (errors and streams too, for every route), kept in the ASGI scope for the call built from the
request, which forwards it to the backend and shows it in logs and ``/status``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from slosched.contract import HEADER_REQUEST_ID
from slosched.gateway.calls.call import client_request_id, next_request_id

Scope = MutableMapping[str, Any]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
IDS_KEY = "slosched.request_ids"  # scope key: (gateway id, the client's id or None)
_HEADER = HEADER_REQUEST_ID.encode("latin-1")


def request_ids(raw: list[tuple[bytes, bytes]]) -> tuple[str, str | None]:
    """(a new gateway id, the client's ``X-Request-Id`` when valid): the first occurrence counts, as for
    every other header (``hotpath._headers``); an invalid one is replaced rather than refused, so a
    client's tracing quirk never costs it its call."""
    client = None
    for name, value in raw:
        if name.lower() == _HEADER:
            client = client_request_id(value.decode("latin-1"))
            break
    return next_request_id(), client


def with_request_id(scope: Scope, send: Send) -> Send:
    """Record the ids in ``scope`` and return ``send`` adding ``x-request-id`` to the response start."""
    ids = request_ids(scope["headers"])
    scope[IDS_KEY] = ids
    header = (_HEADER, (ids[1] or ids[0]).encode("latin-1"))

    async def send_with_id(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), header]
        await send(message)

    return send_with_id


def request_id_of(scope: Scope) -> str:
    """The id echoed for this exchange (for logs); ``-`` outside ``GatewayApp``."""
    ids = scope.get(IDS_KEY)
    return "-" if ids is None else ids[1] or ids[0]
