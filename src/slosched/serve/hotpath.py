"""The OpenAI call routes as plain ASGI: ``/v1/completions`` and ``/v1/chat/completions``.

These carry nearly all of the gateway's traffic, so they skip starlette's middleware stack, request and
response objects and its per-stream task group (together ~100 us of CPU per call on a 2-core machine);
every other route stays on starlette. Behaviour is the same as a starlette handler's: API keys first,
bounded body, 4xx JSON errors naming the field (``Retry-After`` where retrying may succeed), a logged 500
for anything unexpected, and a streamed response that stops — and finishes its call as cancelled — when
the client disconnects.

Invariant: every call accepted by the dispatcher ends in exactly one terminal outcome on every path
(errors, cancellation, client gone before or during the stream).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from slosched.contract import HEADER_API_KEY, HEADER_AUTHORIZATION
from slosched.core.request import Outcome
from slosched.serve.calls import CHAT, COMPLETIONS, Call, HttpError, parse_call, parse_json_object, parse_slo_headers
from slosched.serve.config import GatewayConfig
from slosched.serve.dispatcher import Attempt, Dispatcher
from slosched.serve.forwarding import json_bytes
from slosched.serve.limits import TenantLimiter, authorized

log = logging.getLogger("slosched.serve")
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

# Exact paths served here (a trailing slash is served too, where starlette would have redirected).
HOT_PATHS = {COMPLETIONS: COMPLETIONS, COMPLETIONS + "/": COMPLETIONS, CHAT: CHAT, CHAT + "/": CHAT}
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
    extra = []
    if error.retry_after_s is not None:
        extra.append((b"retry-after", str(max(int(error.retry_after_s + 0.999), 1)).encode()))
    payload = {"error": {"message": error.message, "type": error.code, "code": error.status}}
    await send_json(send, error.status, json_bytes(payload), extra)


class OpenAIRoutes:
    """The ASGI handler of the hot paths of one gateway."""

    def __init__(self, config: GatewayConfig, dispatcher: Dispatcher, limiter: TenantLimiter) -> None:
        self.config = config
        self.dispatcher = dispatcher
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        started = [False]

        async def tracked(message: MutableMapping[str, Any]) -> None:
            started[0] = True
            await send(message)

        try:
            if scope["method"] != "POST":
                raise HttpError(405, "method_not_allowed", f"{path}: only POST is allowed")
            headers = _headers(scope["headers"])
            if not authorized(self.config.api_keys, headers.get(HEADER_AUTHORIZATION), headers.get(HEADER_API_KEY)):
                raise HttpError(401, "unauthorized", "missing or invalid API key")
            body = parse_json_object(await self._body(headers, receive))
            await self._call(path, headers, body, receive, tracked)
        except HttpError as error:
            if not started[0]:
                await send_error(send, error)
        except _ClientGone:
            return
        except Exception:
            log.exception("unhandled error on %s", path)
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
        self, path: str, headers: dict[str, str], body: dict[str, Any], receive: Receive, send: Send
    ) -> None:
        slo = parse_slo_headers(headers)
        dispatcher = self.dispatcher
        wait_s = self.limiter.retry_after_s(slo.tenant)
        if wait_s > 0:
            metrics = dispatcher.metrics
            metrics.labelled(metrics.rejections, "rate_limited").inc()
            raise HttpError(429, "rate_limited", f"tenant {slo.tenant!r} is over its rate limit", wait_s)
        call = parse_call(path, body, slo, dispatcher.clock(), self.config.default_max_tokens)
        dispatcher.accept(call)
        try:
            if not call.stream:
                status, content = await dispatcher.complete(call)
            else:
                attempt = await dispatcher.open(call)
        except HttpError as error:
            dispatcher.finish(call, Outcome.REJECTED if error.status in (429, 503) else Outcome.FAILED, error.code)
            raise
        except BaseException:
            dispatcher.finish(call, Outcome.CANCELLED, "cancelled")
            raise
        if not call.stream:
            await send_json(send, status, content)
            return
        try:
            await self._stream(call, attempt, receive, send)
        finally:
            await dispatcher.abandon(call, attempt)  # no-op unless the relay never ran

    async def _stream(self, call: Call, attempt: Attempt, receive: Receive, send: Send) -> None:
        """Relay the backend's stream; a disconnect (seen by a watcher on ``receive``) cancels the relay."""
        media = attempt.response.header(b"content-type") or "text/event-stream"
        if media.startswith("text/") and "charset=" not in media:
            media += "; charset=utf-8"
        task = asyncio.current_task()
        assert task is not None
        state = {"done": False, "gone": False}

        def on_message(watcher: asyncio.Future[MutableMapping[str, Any]]) -> None:
            if state["done"] or watcher.cancelled():
                return
            if watcher.exception() is None and watcher.result()["type"] != "http.disconnect":
                watch()  # not a disconnect (nothing else is expected once the body was read): keep watching
                return
            state["gone"] = True
            task.cancel()

        watchers: list[asyncio.Future[MutableMapping[str, Any]]] = []

        def watch() -> None:
            watcher = asyncio.ensure_future(receive())
            watcher.add_done_callback(on_message)
            watchers.append(watcher)

        async def write(chunk: bytes, last: bool) -> None:
            if last:
                state["done"] = True  # before the send: completing the response wakes the watcher
            await send({"type": "http.response.body", "body": chunk, "more_body": not last})

        if not attempt.response.complete:
            watch()  # a body already read whole goes out in one write: no waiting, no watcher task needed
        try:
            headers = [(b"content-type", media.encode("latin-1"))]
            await send({"type": "http.response.start", "status": attempt.response.status, "headers": headers})
            await self.dispatcher.relay(call, attempt, write)
        except asyncio.CancelledError:
            if not state["gone"]:
                raise
            task.uncancel()  # our own cancellation (the client left): the call is finished, nothing to send
        finally:
            state["done"] = True
            for watcher in watchers:
                watcher.cancel()
