"""Which backend made each stored response, for which tenant: the Responses API's follow-ups go there.

vLLM keeps a response (``store`` defaults to true) in the memory of the server that made it; a follow-up
(``previous_response_id``), a read (``GET /v1/responses/{id}``) or a cancel anywhere else is a 404. The gateway
reads the id from the response as it passes (the object's first ``"id"``: the response's own, before any
output item's) and keeps the newest ``MAX_RESPONSES`` in order of arrival, the oldest forgotten first (vLLM
keeps every stored response in memory until it restarts; the gateway's bound keeps its own memory flat). The
tenant is kept too: one tenant never reads, cancels or continues another's response, whoever holds the id.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slosched.gateway.backends.backend import Backend
from slosched.gateway.calls.call import HttpError
from slosched.gateway.calls.responses import RESPONSE_ID_CHARS, RESPONSES

MAX_RESPONSES = 100_000  # ids kept (~20 MB at worst); a follow-up of a forgotten one is a 404
_ID = re.compile(rb'"id"\s*:\s*"([^"\\]{1,%d})"' % RESPONSE_ID_CHARS)


@dataclass(frozen=True, slots=True)
class ResponseOwner:
    backend: str
    tenant: str


class ResponseOwners:
    """Response id -> its backend and tenant, the newest ``limit`` of them."""

    __slots__ = ("_owners", "limit")

    def __init__(self, limit: int = MAX_RESPONSES) -> None:
        self._owners: OrderedDict[str, ResponseOwner] = OrderedDict()
        self.limit = limit

    def __len__(self) -> int:
        return len(self._owners)

    def record(self, response_id: str, backend: str, tenant: str) -> None:
        self._owners[response_id] = ResponseOwner(backend, tenant)
        self._owners.move_to_end(response_id)
        while len(self._owners) > self.limit:
            self._owners.popitem(last=False)

    def owner(self, response_id: str, tenant: str) -> ResponseOwner | None:
        """The response's owner when ``tenant`` made it (None: unknown here, or another tenant's)."""
        found = self._owners.get(response_id)
        return found if found is not None and found.tenant == tenant else None


def response_id(head: bytes) -> str | None:
    """The id of the response object that ``head`` (a JSON body, or a stream's first events) starts."""
    match = _ID.search(head)
    return match.group(1).decode("utf-8", "replace") if match else None


def pinned_backend(owners: ResponseOwners, backends: Sequence[Backend], previous: Any, tenant: str) -> str | None:
    """The backend a call continuing ``previous`` (its ``previous_response_id``; None: a new conversation)
    must go to (``owner_backend``)."""
    if previous is None:
        return None
    return owner_backend(owners, backends, str(previous), tenant, "previous_response_id").name


def owner_backend(
    owners: ResponseOwners, backends: Sequence[Backend], response: str, tenant: str, field: str
) -> Backend:
    """The backend holding ``tenant``'s stored ``response``; 404 naming ``field`` when this gateway knows no
    such response of the tenant's, or its backend has left the config (the response went with it)."""
    found = owners.owner(response, tenant)
    backend = None if found is None else next((b for b in backends if b.name == found.backend), None)
    if backend is None:
        raise HttpError(404, "response_not_found", f"{field}: no such stored response", param=field)
    return backend


def stored_response_path(path: str) -> str | None:
    """The response id of a path that reads or cancels a stored response (``/v1/responses/{id}[/cancel]``)."""
    parts = path.split("/")
    if len(parts) in (4, 5) and path.startswith(RESPONSES + "/") and parts[3] and parts[4:] in ([], ["cancel"]):
        return parts[3]
    return None
