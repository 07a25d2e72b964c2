"""The gateway's HTTP surface (starlette): OpenAI-compatible calls, the job API, /metrics, /health.

Bad input always gets a 4xx naming the field; an unexpected exception is logged and answered 500 (the
fuzz tests assert it never happens). Errors carry ``Retry-After`` when retrying later may succeed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from slosched.core.request import Outcome
from slosched.serve.backends import periodic
from slosched.serve.calls import CHAT, COMPLETIONS, HttpError, parse_call, parse_json_object, parse_slo_headers
from slosched.serve.config import GatewayConfig
from slosched.serve.dispatcher import Attempt, Dispatcher
from slosched.serve.jobs import JobManager
from slosched.serve.limits import TenantLimiter, authorized

log = logging.getLogger("slosched.serve")
Handler = Callable[[Request], Awaitable[Response]]


class Gateway:
    """Everything one running gateway holds; ``app`` is its ASGI application."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.dispatcher = Dispatcher(config)
        self.jobs = JobManager(self.dispatcher)
        self.limiter = TenantLimiter(config.tenant_rate_limits, config.default_rate_limit, self.dispatcher.clock)
        self._stop = asyncio.Event()
        self._reaper: asyncio.Task[None] | None = None
        self.app = Starlette(routes=self._routes(), lifespan=self._lifespan)

    def _routes(self) -> list[Route]:
        guarded = self._guard
        return [
            Route(COMPLETIONS, guarded(self.openai_call), methods=["POST"]),
            Route(CHAT, guarded(self.openai_call), methods=["POST"]),
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

    def _guard(self, handler: Handler) -> Handler:
        """API keys, then the handler; HttpErrors become JSON errors, anything else a logged 500."""

        async def guarded(request: Request) -> Response:
            headers = request.headers
            if not authorized(self.config.api_keys, headers.get("authorization"), headers.get("x-api-key")):
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

    async def openai_call(self, request: Request) -> Response:
        body = await self._json_body(request)
        slo = parse_slo_headers(request.headers)
        wait_s = self.limiter.retry_after_s(slo.tenant)
        if wait_s > 0:
            self.dispatcher.metrics.rejections.labels("rate_limited").inc()
            raise HttpError(429, "rate_limited", f"tenant {slo.tenant!r} is over its rate limit", wait_s)
        dispatcher = self.dispatcher
        call = parse_call(request.url.path, body, slo, dispatcher.clock(), self.config.default_max_tokens)
        dispatcher.accept(call)
        try:
            if not call.stream:
                status, content = await dispatcher.complete(call)
                return Response(content, status_code=status, media_type="application/json")
            attempt = await dispatcher.open(call)
        except HttpError as error:
            outcome = Outcome.REJECTED if error.status in (429, 503) else Outcome.FAILED
            dispatcher.finish(call, outcome, error.code)
            raise
        except BaseException:
            dispatcher.finish(call, Outcome.CANCELLED, "cancelled")
            raise
        media_type = attempt.response.headers.get("content-type", "text/event-stream")
        return _RelayResponse(dispatcher, call, attempt, media_type)

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


class _RelayResponse(StreamingResponse):
    """A streaming pass-through that finishes its call even when the client leaves before the body
    iterator ever ran (starlette then never enters the generator, so its ``finally`` cannot)."""

    def __init__(self, dispatcher: Dispatcher, call: Any, attempt: Attempt, media_type: str) -> None:
        super().__init__(dispatcher.relay(call, attempt), status_code=attempt.response.status, media_type=media_type)
        self._dispatcher = dispatcher
        self._call = call
        self._attempt = attempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._dispatcher.abandon(self._call, self._attempt)


def error_response(error: HttpError) -> JSONResponse:
    headers = {}
    if error.retry_after_s is not None:
        headers["Retry-After"] = str(max(int(error.retry_after_s + 0.999), 1))
    payload = {"error": {"message": error.message, "type": error.code, "code": error.status}}
    return JSONResponse(payload, status_code=error.status, headers=headers)


def create_app(config: GatewayConfig) -> Starlette:
    return Gateway(config).app
