"""The picker process: a grpc.aio server with the ext_proc service and gRPC health, plus its background loops
(the endpoints' metrics every ``scrape_interval_s``; the InferencePool's pods every ``kubernetes.refresh_s``).

Health follows GIE's protocol: ``liveness`` serves while the process answers; ``readiness`` and the ext_proc
service name serve once the pool has been read (at start for a static list, after the first successful read
of the InferencePool otherwise).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from slosched.gateway.backends.backend import periodic
from slosched.picker.config import EndpointConfig, PickerConfig
from slosched.picker.extproc import ExternalProcessor
from slosched.picker.metrics import PickerMetrics
from slosched.picker.pool import EndpointPool
from slosched.picker.scrape import Fetch, HttpFetch, scrape_pool

log = logging.getLogger("slosched.picker")

EXT_PROC_SERVICE = "envoy.service.ext_proc.v3.ExternalProcessor"
ReadEndpoints = Callable[[], Awaitable[list[EndpointConfig]]]


class PickerServer:
    """One picker: ``start`` binds (port 0: any free port, returned), ``stop`` ends everything it started."""

    def __init__(
        self,
        config: PickerConfig,
        fetch: Fetch | None = None,
        read_endpoints: ReadEndpoints | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.config = config
        self.pool = EndpointPool(config, clock)
        self.metrics = PickerMetrics(self.pool)
        self.metrics_port: int | None = None  # bound once started, when the config serves metrics
        self._own_fetch = HttpFetch(config.scrape_timeout_s) if fetch is None else None
        self.fetch: Fetch = fetch or self._own_fetch  # type: ignore[assignment]
        self._read_endpoints = read_endpoints
        self._server: grpc.aio.Server | None = None
        self._health = health_aio.HealthServicer()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, host: str | None = None, port: int | None = None, metrics_port: int | None = None) -> int:
        """Bind the ext_proc port (and, when configured or given, the metrics port; 0: any free one)."""
        metrics_port = self.config.metrics_port if metrics_port is None else metrics_port
        if metrics_port is not None:  # first: a port in use is an error before anything else runs
            self.metrics_port = self.metrics.serve(host or self.config.host, metrics_port)
        server = grpc.aio.server()
        pb_grpc.add_ExternalProcessorServicer_to_server(ExternalProcessor(self.pool, self.metrics), server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        bound = server.add_insecure_port(f"{host or self.config.host}:{self.config.port if port is None else port}")
        await server.start()
        self._server = server
        await self._set_health("liveness", True)
        await self._set_ready(self._read_endpoints is None)
        self._tasks = [asyncio.create_task(periodic(self.config.scrape_interval_s, self.scrape, self._stop))]
        if self._read_endpoints is not None and self.config.kubernetes is not None:
            refresh_s = self.config.kubernetes.refresh_s
            self._tasks.append(asyncio.create_task(periodic(refresh_s, self.refresh, self._stop)))
        return bound

    async def scrape(self) -> None:
        await scrape_pool(self.pool, self.fetch)

    async def refresh(self) -> None:
        """Read the pool's endpoints again and serve them (unchanged ones keep their state)."""
        assert self._read_endpoints is not None
        endpoints = await self._read_endpoints()
        for backend in self.pool.set_endpoints(endpoints):
            await backend.close()
        await self._set_ready(True)

    async def _set_ready(self, ready: bool) -> None:
        for service in ("readiness", EXT_PROC_SERVICE, ""):
            await self._set_health(service, ready)

    async def _set_health(self, service: str, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        await self._health.set(service, status)

    async def stop(self, grace_s: float = 1.0) -> None:
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._server is not None:
            await self._server.stop(grace_s)
        slots = self.pool.slots
        if slots is not None:
            for backend in slots.backends:
                await backend.close()
        if self._own_fetch is not None:
            await self._own_fetch.aclose()
        self.metrics.close()


async def run_picker(
    config: PickerConfig, host: str | None = None, port: int | None = None, metrics_port: int | None = None
) -> None:
    """Serve until SIGINT or SIGTERM (``slosched picker``)."""
    read_endpoints: ReadEndpoints | None = None
    if config.kubernetes is not None:
        from slosched.picker.kube import ClusterSource

        read_endpoints = ClusterSource(config.kubernetes).aread  # a missing client or credentials: error: now
    server = PickerServer(config, read_endpoints=read_endpoints)
    bound = await server.start(host, port, metrics_port)
    metrics = "" if server.metrics_port is None else f", /metrics on port {server.metrics_port}"
    log.warning("slosched picker (ext_proc) on %s:%d%s", host or config.host, bound, metrics)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, done.set)
    try:
        await done.wait()
    finally:
        await server.stop()
