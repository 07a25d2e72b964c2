"""Backends: one vLLM server each — its HTTP client, health state and scraped engine metrics.

A backend is *up* until a health check or a forwarded request fails to connect; a down backend is skipped
by routing and probed again every ``retry_down_after_s`` (and on every health tick), so a restarted server
rejoins by itself. Scraped values are stale by at most one ``scrape_interval_s`` plus the scrape time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from slosched.serve.config import BackendConfig, GatewayConfig

log = logging.getLogger("slosched.serve")

# vLLM metric name -> field of EngineMetrics (gauges; summed over the engines a server reports).
_GAUGES = {
    "vllm:num_requests_running": "num_running",
    "vllm:num_requests_waiting": "num_waiting",
    "vllm:kv_cache_usage_perc": "kv_usage",
}


@dataclass(slots=True)
class EngineMetrics:
    """Last scraped values of one vLLM server (``kv_usage`` in [0, 1]); ``scraped_s`` on the gateway clock,
    -1 before the first successful scrape."""

    num_running: float = 0.0
    num_waiting: float = 0.0
    kv_usage: float = 0.0
    scraped_s: float = -1.0


def parse_vllm_metrics(text: str) -> EngineMetrics:
    """Read the gauges slosched uses from a Prometheus exposition; missing gauges read as 0."""
    values = {field: 0.0 for field in _GAUGES.values()}
    for family in text_string_to_metric_families(text):
        field = _GAUGES.get(family.name)
        if field is None:
            continue
        values[field] = sum(sample.value for sample in family.samples)
    return EngineMetrics(values["num_running"], values["num_waiting"], min(max(values["kv_usage"], 0.0), 1.0))


class Backend:
    """HTTP client + health + scraped metrics of one server. ``index`` is its position in the config."""

    def __init__(self, index: int, config: BackendConfig, gateway: GatewayConfig) -> None:
        self.index = index
        self.config = config
        self.name = config.name
        self.url = config.url.rstrip("/")
        self.healthy = True
        self.down_since_s = -1.0
        self.last_error = ""
        self.metrics = EngineMetrics()
        self._gateway = gateway
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The backend's connection pool (made on first use: aiohttp sessions belong to a running loop)."""
        if self._session is None or self._session.closed:
            timeouts = self._gateway.timeouts
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30.0),
                timeout=aiohttp.ClientTimeout(
                    total=timeouts.request_s, connect=timeouts.connect_s, sock_read=timeouts.read_s
                ),
            )
        return self._session

    def mark_down(self, reason: str) -> None:
        if self.healthy:
            log.warning("backend %s marked down: %s", self.name, reason)
            self.down_since_s = time.monotonic()
        self.healthy = False
        self.last_error = reason

    def mark_up(self) -> None:
        if not self.healthy:
            log.info("backend %s is up again", self.name)
        self.healthy = True
        self.last_error = ""

    def routable(self) -> bool:
        """Up, or down long enough that one real request may probe it (the retry path catches failure)."""
        if self.healthy:
            return True
        return time.monotonic() - self.down_since_s >= self._gateway.retry_down_after_s

    async def _get_text(self, path: str) -> tuple[int, str]:
        timeout = aiohttp.ClientTimeout(total=self._gateway.timeouts.health_s)
        async with self.session.get(self.url + path, timeout=timeout) as response:
            return response.status, await response.text()

    async def check_health(self) -> bool:
        try:
            status, _ = await self._get_text("/health")
        except (aiohttp.ClientError, TimeoutError) as error:
            self.mark_down(f"health check: {type(error).__name__}")
            return False
        if status == 200:
            self.mark_up()
            return True
        self.mark_down(f"health check: HTTP {status}")
        return False

    async def scrape(self, now_s: float) -> bool:
        """Refresh ``metrics``; a failed scrape keeps the previous values (and their timestamp)."""
        try:
            status, text = await self._get_text("/metrics")
            if status != 200:
                return False
            metrics = parse_vllm_metrics(text)
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            log.debug("scrape of %s failed: %s", self.name, error)
            return False
        metrics.scraped_s = now_s
        self.metrics = metrics
        return True

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


async def periodic(interval_s: float, action: Callable[[], Awaitable[object]], stop: asyncio.Event) -> None:
    """Run ``await action()`` every ``interval_s`` until ``stop`` is set; errors are logged, never fatal."""
    while not stop.is_set():
        try:
            await action()
        except Exception:  # a scrape/health bug must not kill the loop that revives backends
            log.exception("periodic task failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval_s)
