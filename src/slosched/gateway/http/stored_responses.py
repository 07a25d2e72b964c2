"""``GET /v1/responses/{id}`` and ``POST /v1/responses/{id}/cancel``: read or stop a stored response on the
backend that made it (``dispatch/response_owners.py``), as vLLM serves them there.

Only the tenant that made a response reaches it: any other id, or one this gateway does not know (made before
a restart, forgotten, or on a backend no longer configured), is a 404 naming ``response_id``. The backend's
answer comes back as it is, a stream (``?stream=true``) relayed event by event. These are reads, not
generations: they take the tenant's request rate but no queue place.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from slosched.gateway.backends.forwarding import close_response
from slosched.gateway.backends.upstream import UpstreamError, UpstreamResponse
from slosched.gateway.calls.call import HttpError
from slosched.gateway.calls.responses import RESPONSES
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.dispatch.response_owners import ResponseOwners, owner_backend
from slosched.gateway.http.request_ids import request_id_of
from slosched.gateway.ops.identity import Principal

_EVENT_STREAM = "text/event-stream"


class StoredResponses:
    """The two routes of one gateway (its ``owners``, filled by the hot path as responses pass)."""

    def __init__(self, dispatcher: Dispatcher, owners: ResponseOwners) -> None:
        self.dispatcher = dispatcher
        self.owners = owners

    async def retrieve(self, request: Request, principal: Principal) -> Response:
        return await self._forward("GET", request, principal, "")

    async def cancel(self, request: Request, principal: Principal) -> Response:
        return await self._forward("POST", request, principal, "/cancel")

    async def _forward(self, method: str, request: Request, principal: Principal, suffix: str) -> Response:
        response_id = str(request.path_params["response_id"])
        backend = owner_backend(self.owners, self.dispatcher.backends, response_id, principal.tenant, "response_id")
        query = f"?{request.url.query}" if request.url.query else ""
        path = f"{RESPONSES}/{quote(response_id, safe='')}{suffix}{query}"
        timeouts = self.dispatcher.config.timeouts
        headers = {"x-request-id": request_id_of(request.scope)}
        try:
            upstream = await backend.pool.request(method, path, headers=headers, first_byte_s=timeouts.first_byte_s)
        except UpstreamError as error:
            raise HttpError(502, "backend_failed", f"backend {backend.name}: {error}", 1.0) from error
        media = upstream.header(b"content-type") or "application/json"
        if media.startswith(_EVENT_STREAM):
            return StreamingResponse(_relay(upstream, timeouts.read_s), status_code=upstream.status, media_type=media)
        try:
            body = await upstream.read(timeouts.read_s)
        except UpstreamError as error:
            close_response(upstream, False)
            raise HttpError(502, "backend_failed", f"backend {backend.name}: {error}", 1.0) from error
        close_response(upstream, True)
        return Response(body, status_code=upstream.status, media_type=media)


async def _relay(upstream: UpstreamResponse, read_s: float) -> AsyncIterator[bytes]:
    """The backend's stream as it comes; the connection is dropped if the client leaves mid-stream."""
    whole = False
    try:
        while chunk := await upstream.next_chunk(read_s):  # b"": the body's end
            yield chunk
        whole = True
    finally:
        close_response(upstream, whole)
