"""The OpenAI call routes as plain ASGI: ``/v1/completions``, ``/v1/chat/completions`` and ``/v1/responses``
(``calls/responses.py``: a stored response's id is read as it passes, so its follow-ups go where it lives),
Anthropic's ``/v1/messages`` (``calls/messages.py``), and vLLM's other JSON routes (embeddings, pooling,
scoring, tokenizing: ``calls/other_routes.py``) the same way.

These carry nearly all of the gateway's traffic, so they skip starlette's middleware stack, request and
response objects and its per-stream task group (together ~100 us of CPU per call on a 2-core machine);
every other route stays on starlette. Behaviour is the same as a starlette handler's: API keys first,
bounded body, 4xx JSON errors naming the field (``Retry-After`` where retrying may succeed), a logged 500
for anything unexpected, and a call whose client disconnects — queued, waiting on its backend, or
streaming — stops there and finishes as cancelled (``client_disconnected``; ``gateway/http/disconnect.py``).

Invariant: every call accepted by the dispatcher ends in exactly one terminal outcome on every path
(errors, cancellation, client gone before or during the stream).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

from slosched.core.request import Outcome
from slosched.gateway.backends.forwarding import json_bytes
from slosched.gateway.calls.call import (
    CHAT,
    COMPLETIONS,
    Call,
    HttpError,
    error_document,
    parse_slo_headers,
    retry_after_header,
)
from slosched.gateway.calls.dialects.registry import with_dialects
from slosched.gateway.calls.json_body import check_json_media_type, parse_json_object
from slosched.gateway.calls.messages import MESSAGES
from slosched.gateway.calls.other_routes import GENERATION_PATHS, OTHER_ROUTES, parse_other_call
from slosched.gateway.calls.responses import RESPONSES, stored
from slosched.gateway.dispatch.admission import admit_call
from slosched.gateway.dispatch.dispatcher import Attempt, Dispatcher
from slosched.gateway.dispatch.generations import generation_call
from slosched.gateway.dispatch.response_owners import ResponseOwners, response_id
from slosched.gateway.http.disconnect import DisconnectWatch
from slosched.gateway.http.request_ids import IDS_KEY, request_id_of
from slosched.gateway.jobs.sessions import SessionJobs
from slosched.gateway.ops.config import GatewayConfig
from slosched.gateway.ops.identity import Identities, Principal, scoped
from slosched.gateway.ops.limits import TenantLimits

log = logging.getLogger("slosched.gateway")
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

# Exact paths served here (a trailing slash is served too, where starlette would have redirected): the
# generation routes, and vLLM's other JSON routes, forwarded whole (``calls/other_routes.py``).
HOT_PATHS = {
    variant: path for path in (COMPLETIONS, CHAT, MESSAGES, RESPONSES, *OTHER_ROUTES) for variant in (path, path + "/")
}
_JSON = b"application/json"


class _ClientGone(Exception):
    """The client disconnected before its request body was complete."""


def _headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Request headers by lowercase name, first occurrence wins (as starlette's ``Headers.get``)."""
    headers: dict[str, str] = {}
    for name, value in raw:
        key = name.decode("latin-1").lower()
        if key not in headers:
            headers[key] = value.decode("latin-1")
    return headers


async def send_json(send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", _JSON), (b"content-length", b"%d" % len(body))]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, error: HttpError) -> None:
    retry_after = retry_after_header(error)
    extra = [] if retry_after is None else [(b"retry-after", retry_after.encode())]
    await send_json(send, error.status, json_bytes(error_document(error)), extra)


class Access(Protocol):
    """Who may call and within which limits, read at every request (the ``Gateway``: a config reload swaps
    its ``identities`` and the next request sees the new ones)."""

    identities: Identities
    limits: TenantLimits


class OpenAIRoutes:
    """The ASGI handler of the hot paths of one gateway."""

    def __init__(
        self,
        config: GatewayConfig,
        dispatcher: Dispatcher,
        access: Access,
        sessions: SessionJobs | None = None,
        owners: ResponseOwners | None = None,
    ) -> None:
        self.config = config
        self.dispatcher = dispatcher
        self.access = access
        self.sessions = sessions if sessions is not None else SessionJobs(config.timeouts.job_idle_s)
        self.owners = owners if owners is not None else ResponseOwners()  # the Responses API's stored responses

    async def __call__(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        started = [False]

        async def tracked(message: MutableMapping[str, Any]) -> None:
            started[0] = True
            await send(message)

        try:
            if scope["method"] != "POST":
                raise HttpError(405, "method_not_allowed", f"{path}: only POST is allowed")
            headers = _headers(scope["headers"])
            access = self.access
            principal = access.identities.resolve(headers)  # 401/403 before the body is read
            access.limits.admit_request(principal)
            check_json_media_type(headers.get("content-type"))
            body = parse_json_object(await self._body(headers, receive))
            await self._call(path, headers, body, principal, receive, tracked, scope.get(IDS_KEY))
        except HttpError as error:
            if not started[0]:
                await send_error(send, error)
        except _ClientGone:
            return
        except Exception:
            log.exception("unhandled error on %s (request %s)", path, request_id_of(scope))
            if not started[0]:
                await send_error(send, HttpError(500, "internal_error", "internal error"))

    async def _body(self, headers: dict[str, str], receive: Receive) -> bytes:
        limit = self.config.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            raise HttpError(413, "body_too_large", f"body: at most {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _ClientGone
            chunk = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > limit:
                    raise HttpError(413, "body_too_large", f"body: at most {limit} bytes")
                chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _call(
        self,
        path: str,
        headers: dict[str, str],
        body: dict[str, Any],
        principal: Principal,
        receive: Receive,
        send: Send,
        ids: tuple[str, str | None] | None = None,
    ) -> None:
        # Other stacks' fields (vllm-router, Dynamo, llm-d) fill what slosched's headers left empty; then the
        # tenant, priority class and SLO floors are the operator's, whichever wrote them.
        slo = scoped(with_dialects(parse_slo_headers(headers), headers, body), principal)
        dispatcher = self.dispatcher
        now = dispatcher.clock()
        if path in GENERATION_PATHS:
            stored_by, max_tokens = (self.owners, dispatcher.backends), self.config.default_max_tokens
            call = generation_call(path, body, slo, now, max_tokens, dispatcher.models, stored_by, ids)
        else:
            call = parse_other_call(path, body, slo, now, dispatcher.models, ids)
        if slo.dialect is not None and path in GENERATION_PATHS:
            self.sessions.attach(call, slo, now)  # one job across calls: its first call's arrival and deadline
        request = call.request
        admit_call(dispatcher, request, now, slo.reject_infeasible)  # an early 503 when it cannot make its deadline
        lease = self.access.limits.admit_call(principal, call.token_cost)
        if lease is None:
            await self._run(call, receive, send)
            return
        try:
            await self._run(call, receive, send)
        finally:
            lease.release()  # the call has ended, whatever the outcome (its terminal outcome is recorded)

    async def _run(self, call: Call, receive: Receive, send: Send) -> None:
        """Serve an accepted call while watching for its client leaving: a disconnect at any point (queued,
        waiting on the backend, streaming) cancels the work and finishes the call ``client_disconnected``."""
        dispatcher = self.dispatcher
        dispatcher.accept(call)
        watch = DisconnectWatch(receive, call.client_gone)
        watch.start()
        try:
            await self._serve(call, watch, send)
        except asyncio.CancelledError:
            gone = watch.absorb()
            dispatcher.finish(call, Outcome.CANCELLED, "client_disconnected" if gone else "cancelled")
            if not gone:
                raise
        finally:
            watch.stop()

    async def _serve(self, call: Call, watch: DisconnectWatch, send: Send) -> None:
        dispatcher = self.dispatcher
        try:
            if not call.stream:
                status, content = await dispatcher.complete(call)
            else:
                attempt = await dispatcher.open(call)
        except HttpError as error:
            dispatcher.finish(call, Outcome.REJECTED if error.status in (429, 503) else Outcome.FAILED, error.code)
            raise
        except asyncio.CancelledError:
            raise  # the caller tells a client that left from a shutdown
        except BaseException:
            dispatcher.finish(call, Outcome.CANCELLED, "cancelled")
            raise
        if not call.stream:
            if stored(call) and status == 200:
                self._remember(call, content)
            watch.done = True  # before the send: completing the response wakes the watcher
            await send_json(send, status, content)
            return
        try:
            await self._stream(call, attempt, watch, send)
        finally:
            await dispatcher.abandon(call, attempt)  # no-op unless the relay never ran

    async def _stream(self, call: Call, attempt: Attempt, watch: DisconnectWatch, send: Send) -> None:
        """Relay the backend's stream (the relay finishes the call, cancelled when the client leaves)."""
        media = attempt.response.header(b"content-type") or "text/event-stream"
        if media.startswith("text/") and "charset=" not in media:
            media += "; charset=utf-8"

        unread = stored(call) and attempt.response.status == 200  # its id is in the first event

        async def write(chunk: bytes, last: bool) -> None:
            nonlocal unread
            if unread:
                unread = not self._remember(call, chunk)
            if last:
                watch.done = True  # before the send: completing the response wakes the watcher
            await send({"type": "http.response.body", "body": chunk, "more_body": not last})

        headers = [(b"content-type", media.encode("latin-1"))]
        await send({"type": "http.response.start", "status": attempt.response.status, "headers": headers})
        await self.dispatcher.relay(call, attempt, write)

    def _remember(self, call: Call, head: bytes) -> bool:
        """Record which backend made the response ``head`` starts (a stored response's follow-ups go there);
        whether its id was found."""
        found = response_id(head)
        if found is not None and call.backend is not None:
            self.owners.record(found, call.backend, call.request.tenant)
        return found is not None
