"""The gateway's HTTP surface: OpenAI-compatible calls (plain ASGI, ``gateway.http.hotpath``: they carry nearly all
traffic), and on starlette the job API, /v1/models, /metrics, /health.

Bad input always gets a 4xx naming the field; an unexpected exception is logged and answered 500 (the
fuzz tests assert it never happens). Errors carry ``Retry-After`` when retrying later may succeed.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from slosched.gateway.calls.call import HttpError, error_document, retry_after_header
from slosched.gateway.calls.json_body import check_json_media_type, parse_json_object
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.dispatch.response_owners import ResponseOwners
from slosched.gateway.http.hotpath import HOT_PATHS, OpenAIRoutes
from slosched.gateway.http.request_ids import request_id_of, with_request_id
from slosched.gateway.http.status_page import STATUS_PAGE_HEADERS, operator_allowed, page_html
from slosched.gateway.http.stored_responses import StoredResponses
from slosched.gateway.jobs.manager import JobManager
from slosched.gateway.jobs.store import open_store
from slosched.gateway.ops.access_log import enable_access_log
from slosched.gateway.ops.config import GatewayConfig
from slosched.gateway.ops.identity import Identities, Principal
from slosched.gateway.ops.limits import TenantLimits

log = logging.getLogger("slosched.gateway")
Handler = Callable[[Request, Principal], Awaitable[Response]]
Endpoint = Callable[[Request], Awaitable[Response]]


_running_gateways = 0


def _freeze_heap() -> None:
    """Move everything alive when the first gateway starts (modules, policies, config: it lives as long as
    the process) out of the cyclic GC's generations, so a full collection under load scans only
    request-time objects: with ~100k startup objects one took ~190 ms, the whole p99 budget many times
    over. Undone when the last gateway stops (frozen objects are never collected, not even at exit)."""
    global _running_gateways
    if _running_gateways == 0:
        gc.freeze()
    _running_gateways += 1


def _thaw_heap() -> None:
    global _running_gateways
    _running_gateways -= 1
    if _running_gateways == 0:
        gc.unfreeze()


class GatewayApp:
    """The gateway's ASGI application: the OpenAI call paths go to ``OpenAIRoutes`` directly, everything
    else (lifespan included) to the starlette app."""

    def __init__(self, hot: OpenAIRoutes, other: Starlette) -> None:
        self.hot = hot
        self.other = other

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            send = with_request_id(scope, send)
            path = HOT_PATHS.get(scope["path"])
            if path is not None:
                await self.hot(scope, receive, send, path)
                return
            raw = scope["path"]
            if len(raw) > 1 and raw.endswith("/"):
                # Served as without the slash: starlette's redirect would echo the client's Host header.
                scope = {**scope, "path": raw.rstrip("/") or "/", "raw_path": None}
        await self.other(scope, receive, send)


class Gateway:
    """Everything one running gateway holds; ``app`` is its ASGI application."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self._started = int(time.time())  # the models' ``created``
        enable_access_log(config.access_log)
        self.dispatcher = Dispatcher(config)
        self.jobs = JobManager(self.dispatcher, open_store(config.job_store))
        # Read by every route at request time: a config reload swaps ``identities`` and takes effect at once;
        # ``limits`` keeps its state (buckets, calls in flight) across reloads.
        self.identities = Identities.from_config(config)
        self.limits = TenantLimits(self.dispatcher.clock, self.dispatcher.metrics)
        self.jobs.limits = self.limits
        self._stop = asyncio.Event()
        self._frozen = False
        owners = ResponseOwners()  # the Responses API's stored responses: filled by the hot path, read here
        self.stored_responses = StoredResponses(self.dispatcher, owners)
        # Unknown paths and wrong methods answer OpenAI-style JSON like every other error (starlette's own
        # answers are plain text).
        handlers = {HTTPException: _starlette_error}
        self.starlette = Starlette(routes=self._routes(), lifespan=self._lifespan, exception_handlers=handlers)
        self.starlette.router.redirect_slashes = False
        self.app = GatewayApp(OpenAIRoutes(config, self.dispatcher, self, self.jobs.sessions, owners), self.starlette)

    def apply_config(self, config: GatewayConfig) -> None:
        """Keys and tenants of a reloaded config, at once (routes read them per request); raises
        ``ConfigError`` or ``ValueError``, changing nothing, when they are invalid."""
        identities = Identities.from_config(config)
        self.config = config
        self.app.hot.config = config
        self.identities = identities
        enable_access_log(config.access_log)

    def _routes(self) -> list[Route]:
        guarded = self._guard
        return [
            Route("/v1/models", guarded(self.models), methods=["GET"]),
            Route("/v1/jobs", guarded(self.create_job), methods=["POST"]),
            Route("/v1/jobs/{job_id}", guarded(self.get_job), methods=["GET"]),
            Route("/v1/jobs/{job_id}", guarded(self.cancel_job), methods=["DELETE"]),
            Route("/v1/jobs/{job_id}/stages", guarded(self.post_stage), methods=["POST"]),
            Route("/v1/jobs/{job_id}/complete", guarded(self.complete_job), methods=["POST"]),
            Route("/v1/responses/{response_id}", guarded(self.stored_responses.retrieve), methods=["GET"]),
            Route("/v1/responses/{response_id}/cancel", guarded(self.stored_responses.cancel), methods=["POST"]),
            Route("/metrics", self.metrics, methods=["GET"]),
            Route("/status", self.status_page, methods=["GET"]),
            Route("/status.json", self._operator_guard(guarded(self.status_json)), methods=["GET"]),
            Route("/health", self.health, methods=["GET"]),
        ]

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await self.start()
        try:
            yield
        finally:
            await self.stop()

    async def start(self) -> None:
        await self.dispatcher.start()
        if not self._frozen:
            _freeze_heap()
            self._frozen = True
        self._stop.clear()
        await self.jobs.start()  # resumes open jobs, starts the job heartbeat and idle reaper

    async def stop(self) -> None:
        self._stop.set()
        await self.jobs.shutdown()
        await self.dispatcher.stop()
        if self._frozen:
            _thaw_heap()
            self._frozen = False

    def _guard(self, handler: Handler) -> Endpoint:
        """The caller's principal and its request rate, then the handler; HttpErrors become JSON errors,
        anything else a logged 500."""

        async def guarded(request: Request) -> Response:
            try:
                principal = self.identities.resolve(request.headers)
                self.limits.admit_request(principal)
                return await handler(request, principal)
            except HttpError as error:
                return error_response(error)
            except ClientDisconnect:
                return Response(status_code=499)
            except Exception:
                log.exception("unhandled error on %s (request %s)", request.url.path, request_id_of(request.scope))
                return error_response(HttpError(500, "internal_error", "internal error"))

        return guarded

    async def _json_body(self, request: Request) -> dict[str, Any]:
        check_json_media_type(request.headers.get("content-type"))
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            raise HttpError(413, "body_too_large", f"body: at most {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise HttpError(413, "body_too_large", f"body: at most {limit} bytes")
            chunks.append(chunk)
        return parse_json_object(b"".join(chunks))

    async def models(self, request: Request, principal: Principal) -> Response:
        """The served models in vLLM's shape (OpenAI's fields and ``max_model_len``: the largest among the
        model's backends, what a call of it may use), so clients that read vLLM's list read this one."""
        limits = self.dispatcher.models
        data = [
            {"id": name, "object": "model", "created": self._started, "owned_by": "slosched", "max_model_len": limit}
            for name, limit in sorted(limits.items())
        ]
        return JSONResponse({"object": "list", "data": data})

    # Every job operation is scoped to the principal: another tenant's job answers 404 like a missing one.
    async def create_job(self, request: Request, principal: Principal) -> Response:
        job = await self.jobs.create(await self._json_body(request), principal)
        return JSONResponse(job, status_code=201)

    async def get_job(self, request: Request, principal: Principal) -> Response:
        return JSONResponse(await self.jobs.get(request.path_params["job_id"], principal))

    async def cancel_job(self, request: Request, principal: Principal) -> Response:
        return JSONResponse(await self.jobs.cancel(request.path_params["job_id"], principal))

    async def post_stage(self, request: Request, principal: Principal) -> Response:
        body = await self._json_body(request)
        return JSONResponse(await self.jobs.post_stage(request.path_params["job_id"], body, principal))

    async def complete_job(self, request: Request, principal: Principal) -> Response:
        return JSONResponse(await self.jobs.complete(request.path_params["job_id"], principal))

    async def metrics(self, request: Request) -> Response:
        return Response(self.dispatcher.metrics.render(), media_type="text/plain; version=0.0.4")

    async def status_page(self, request: Request) -> Response:
        """The status page: no data in it (``/status.json`` is guarded), so anyone may load it."""
        return Response(page_html(), media_type="text/html; charset=utf-8", headers=STATUS_PAGE_HEADERS)

    async def status_json(self, request: Request, principal: Principal | None = None) -> Response:
        return JSONResponse(self.dispatcher.snapshot(), headers={"cache-control": "no-store"})

    def _operator_guard(self, guarded: Endpoint) -> Endpoint:
        """With ``operator_api_keys`` (read at each request: reloads apply) only those keys, else ``guarded``."""

        async def endpoint(request: Request) -> Response:
            keys = self.dispatcher.config.operator_api_keys
            if not keys:
                return await guarded(request)
            if not operator_allowed(request.headers, keys):
                return error_response(HttpError(401, "unauthorized", "missing or invalid operator API key"))
            return await self.status_json(request)

        return endpoint

    async def health(self, request: Request) -> Response:
        backends = {
            b.name: {"up": b.healthy, "ejected": b.outlier.ejected, "error": b.last_error}
            for b in self.dispatcher.backends
        }
        healthy = any(b.healthy for b in self.dispatcher.backends)
        return JSONResponse(
            {"status": "ok" if healthy else "degraded", "backends": backends}, status_code=200 if healthy else 503
        )


async def _starlette_error(request: Request, exc: Exception) -> Response:
    """Starlette's 404 / 405 as OpenAI-style JSON errors."""
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request_error")
    message = f"{request.method} {request.url.path[:64]}: {exc.detail}"
    response = error_response(HttpError(exc.status_code, code, message))
    if exc.headers:
        response.headers.update(exc.headers)
    return response


def error_response(error: HttpError) -> JSONResponse:
    """The hot path's error document (``param`` included) on the starlette routes."""
    retry_after = retry_after_header(error)
    headers = {} if retry_after is None else {"Retry-After": retry_after}
    return JSONResponse(error_document(error), status_code=error.status, headers=headers)


def create_app(config: GatewayConfig) -> GatewayApp:
    return Gateway(config).app
