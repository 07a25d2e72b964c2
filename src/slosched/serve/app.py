"""The gateway's HTTP surface: OpenAI-compatible calls (plain ASGI, ``serve.hotpath``: they carry nearly all
traffic), and on starlette the job API, /v1/models, /metrics, /health.

Bad input always gets a 4xx naming the field; an unexpected exception is logged and answered 500 (the
fuzz tests assert it never happens). Errors carry ``Retry-After`` when retrying later may succeed.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from slosched.contract import HEADER_API_KEY, HEADER_AUTHORIZATION
from slosched.serve.backends import periodic
from slosched.serve.calls import HttpError, parse_json_object
from slosched.serve.config import GatewayConfig
from slosched.serve.dispatcher import Dispatcher
from slosched.serve.hotpath import HOT_PATHS, OpenAIRoutes
from slosched.serve.jobs import JobManager
from slosched.serve.limits import TenantLimiter, authorized

log = logging.getLogger("slosched.serve")
Handler = Callable[[Request], Awaitable[Response]]


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
            path = HOT_PATHS.get(scope["path"])
            if path is not None:
                await self.hot(scope, receive, send, path)
                return
        await self.other(scope, receive, send)


class Gateway:
    """Everything one running gateway holds; ``app`` is its ASGI application."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.dispatcher = Dispatcher(config)
        self.jobs = JobManager(self.dispatcher)
        self.limiter = TenantLimiter(config.tenant_rate_limits, config.default_rate_limit, self.dispatcher.clock)
        self._stop = asyncio.Event()
        self._reaper: asyncio.Task[None] | None = None
        self._frozen = False
        self.starlette = Starlette(routes=self._routes(), lifespan=self._lifespan)
        self.app = GatewayApp(OpenAIRoutes(config, self.dispatcher, self.limiter), self.starlette)

    def _routes(self) -> list[Route]:
        guarded = self._guard
        return [
            Route("/v1/models", guarded(self.models), methods=["GET"]),
            Route("/v1/jobs", guarded(self.create_job), methods=["POST"]),
            Route("/v1/jobs/{job_id}", guarded(self.get_job), methods=["GET"]),
            Route("/v1/jobs/{job_id}", guarded(self.cancel_job), methods=["DELETE"]),
            Route("/v1/jobs/{job_id}/stages", guarded(self.post_stage), methods=["POST"]),
            Route("/v1/jobs/{job_id}/complete", guarded(self.complete_job), methods=["POST"]),
            Route("/metrics", self.metrics, methods=["GET"]),
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
        interval = min(self.config.timeouts.job_idle_s / 4, 5.0)
        self._reaper = asyncio.create_task(periodic(interval, self.jobs.reap_idle, self._stop))

    async def stop(self) -> None:
        self._stop.set()
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        await self.jobs.shutdown()
        await self.dispatcher.stop()
        if self._frozen:
            _thaw_heap()
            self._frozen = False

    def _guard(self, handler: Handler) -> Handler:
        """API keys, then the handler; HttpErrors become JSON errors, anything else a logged 500."""

        async def guarded(request: Request) -> Response:
            headers = request.headers
            if not authorized(self.config.api_keys, headers.get(HEADER_AUTHORIZATION), headers.get(HEADER_API_KEY)):
                return error_response(HttpError(401, "unauthorized", "missing or invalid API key"))
            try:
                return await handler(request)
            except HttpError as error:
                return error_response(error)
            except ClientDisconnect:
                return Response(status_code=499)
            except Exception:
                log.exception("unhandled error on %s", request.url.path)
                return error_response(HttpError(500, "internal_error", "internal error"))

        return guarded

    async def _json_body(self, request: Request) -> dict[str, Any]:
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

    async def models(self, request: Request) -> Response:
        names = sorted({backend.model for backend in self.config.backends})
        return JSONResponse({"object": "list", "data": [{"id": name, "object": "model"} for name in names]})

    async def create_job(self, request: Request) -> Response:
        job = self.jobs.create(await self._json_body(request))
        return JSONResponse(job.as_json(), status_code=201)

    async def get_job(self, request: Request) -> Response:
        return JSONResponse(self.jobs.get(request.path_params["job_id"]).as_json())

    async def cancel_job(self, request: Request) -> Response:
        return JSONResponse(self.jobs.cancel(request.path_params["job_id"]).as_json())

    async def post_stage(self, request: Request) -> Response:
        body = await self._json_body(request)
        return JSONResponse(await self.jobs.post_stage(request.path_params["job_id"], body))

    async def complete_job(self, request: Request) -> Response:
        job = self.jobs.get(request.path_params["job_id"])
        if job.kind != "workflow" or (job.status != "running" and job.status != "completed"):
            raise HttpError(409, "job_finished", f"job {job.id!r} is {job.status}")
        if job.active_stages:
            raise HttpError(409, "stage_running", f"job {job.id!r} still runs a stage")
        self.jobs.finish(job, "completed", "")
        return JSONResponse(job.as_json())

    async def metrics(self, request: Request) -> Response:
        return Response(self.dispatcher.metrics.render(), media_type="text/plain; version=0.0.4")

    async def health(self, request: Request) -> Response:
        backends = {b.name: {"up": b.healthy, "error": b.last_error} for b in self.dispatcher.backends}
        healthy = any(b.healthy for b in self.dispatcher.backends)
        return JSONResponse({"status": "ok" if healthy else "degraded", "backends": backends},
                            status_code=200 if healthy else 503)  # fmt: skip


def error_response(error: HttpError) -> JSONResponse:
    headers = {}
    if error.retry_after_s is not None:
        headers["Retry-After"] = str(max(int(error.retry_after_s + 0.999), 1))
    payload = {"error": {"message": error.message, "type": error.code, "code": error.status}}
    return JSONResponse(payload, status_code=error.status, headers=headers)


def create_app(config: GatewayConfig) -> GatewayApp:
    return Gateway(config).app


def run_gateway(config: GatewayConfig, host: str, port: int) -> None:
    """Serve until interrupted: uvicorn on uvloop + httptools ("auto" picks both when installed, as they
    are on Linux), access log off (uvicorn formats each line's fields even when the level drops it)."""
    import uvicorn

    uvicorn.run(create_app(config), host=host, port=port, log_level="warning", access_log=False)
