"""Backends: one vLLM server each — its HTTP client, health state and scraped engine metrics.

A backend is *up* until a health check or a forwarded request fails to connect; a down backend is skipped
by routing and probed again every ``retry_down_after_s`` (and on every health tick), so a restarted server
rejoins by itself. Independently, ``outlier`` ejects a backend whose calls keep failing although its health
check passes (``ejection.py``). Scraped values are stale by at most one ``scrape_interval_s`` plus the scrape time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from slosched.gateway.backends.ejection import Outlier
from slosched.gateway.backends.engine_state import LINE_PREFIXES, ScrapedEngineState, engine_state_from_gauges
from slosched.gateway.backends.upstream import UpstreamError, UpstreamPool
from slosched.gateway.ops.config import BackendConfig, GatewayConfig

log = logging.getLogger("slosched.gateway")

# vLLM metric name -> field of EngineMetrics (gauges; summed over the engines a server reports).
_GAUGES = {
    "vllm:num_requests_running": "num_running",
    "vllm:num_requests_waiting": "num_waiting",
    "vllm:kv_cache_usage_perc": "kv_usage",
}
# Sample lines of those gauges: the name, then labels or the value (never a longer name's prefix).
_GAUGE_PREFIXES = tuple(f"{name}{end}" for name in _GAUGES for end in ("{", " "))
_WANTED_PREFIXES = _GAUGE_PREFIXES + LINE_PREFIXES  # + the slosched plugin's engine state (PRISM's s_e)


@dataclass(slots=True)
class EngineMetrics:
    """Last scraped values of one vLLM server (``kv_usage`` in [0, 1]); ``scraped_s`` on the gateway clock,
    -1 before the first successful scrape; ``engine_state`` the slosched plugin's exported state, None when
    the server exports none (``gateway/backends/engine_state.py``)."""

    num_running: float = 0.0
    num_waiting: float = 0.0
    kv_usage: float = 0.0
    scraped_s: float = -1.0
    engine_state: ScrapedEngineState | None = None


def parse_vllm_metrics(text: str) -> EngineMetrics:
    """Read the gauges slosched uses from a Prometheus exposition; missing vLLM gauges read as 0, the
    plugin's engine state as None unless complete.

    Only the lines of those gauges are handed to the parser: a vLLM exposition has ~2,000 lines of
    histograms, which prometheus-client's parser takes tens of milliseconds for, blocking the event loop
    (and every request's latency) once per scrape."""
    values = {field: 0.0 for field in _GAUGES.values()}
    exported: dict[str, float] = {}
    wanted = "\n".join(line for line in text.splitlines() if line.startswith(_WANTED_PREFIXES))
    for family in text_string_to_metric_families(wanted):
        field = _GAUGES.get(family.name)
        if field is None:
            exported.update((sample.name, sample.value) for sample in family.samples)
            continue
        values[field] += sum(sample.value for sample in family.samples)  # untyped: a family per sample
    kv_usage = min(max(values["kv_usage"], 0.0), 1.0)
    state = engine_state_from_gauges(exported) if exported else None
    return EngineMetrics(values["num_running"], values["num_waiting"], kv_usage, engine_state=state)


class Backend:
    """HTTP client + health + scraped metrics of one server. ``index`` is its position in the config."""

    def __init__(self, index: int, config: BackendConfig, gateway: GatewayConfig) -> None:
        self.index = index
        self.config = config
        self.name = config.name
        self.url = config.url.rstrip("/")
        self.healthy = True
        self.health_failed = False  # a health check failed since the last one that passed
        self.down_since_s = -1.0
        self.last_error = ""
        self.metrics = EngineMetrics()
        self.outlier = Outlier(gateway.ejection, config.name)  # ejection by call outcomes (ejection.py)
        self._gateway = gateway
        self.engine_state_max_age_s = gateway.engine_state_max_age_s
        # Keep-alive connections; ``timeouts.request_s`` bounds a whole exchange, reads are bounded per call.
        self.pool = UpstreamPool(self.url, gateway.timeouts.connect_s, gateway.timeouts.request_s)

    def mark_down(self, reason: str) -> None:
        if self.healthy:
            log.warning("backend %s marked down: %s", self.name, reason)
            self.down_since_s = time.monotonic()
        self.healthy = False
        self.last_error = reason

    def mark_up(self) -> None:
        if not self.healthy:
            log.info("backend %s is up again", self.name)
        if self.health_failed:  # an outage its health checks saw: the calls it failed say no more
            self.outlier.recovered()
            self.health_failed = False
        self.healthy = True
        self.last_error = ""

    def routable(self) -> bool:
        """Up, or down long enough that one real request may probe it (the retry path catches failure)."""
        if self.healthy:
            return True
        return time.monotonic() - self.down_since_s >= self._gateway.retry_down_after_s

    async def _get_text(self, path: str) -> tuple[int, str]:
        timeout_s = self._gateway.timeouts.health_s
        response = await self.pool.request("GET", path, first_byte_s=timeout_s, total_s=timeout_s)
        try:
            body = await response.read(timeout_s)
        except BaseException:
            response.close()
            raise
        response.release()
        return response.status, body.decode("utf-8", "replace")

    async def check_health(self) -> bool:
        try:
            status, _ = await self._get_text("/health")
        except UpstreamError as error:
            self.health_failed = True
            self.mark_down(f"health check: {type(error).__name__}")
            return False
        if status == 200:
            self.mark_up()
            return True
        self.health_failed = True
        self.mark_down(f"health check: HTTP {status}")
        return False

    async def scrape(self, now_s: float) -> bool:
        """Refresh ``metrics``; a failed scrape keeps the previous values (and their timestamp)."""
        try:
            status, text = await self._get_text("/metrics")
            if status != 200:
                return False
            metrics = parse_vllm_metrics(text)
        except (UpstreamError, ValueError) as error:
            log.debug("scrape of %s failed: %s", self.name, error)
            return False
        metrics.scraped_s = now_s
        self.metrics = metrics
        return True

    async def close(self) -> None:
        await self.pool.aclose()


async def periodic(interval_s: float, action: Callable[[], Awaitable[object]], stop: asyncio.Event) -> None:
    """Run ``await action()`` every ``interval_s`` until ``stop`` is set; errors are logged, never fatal."""
    while not stop.is_set():
        try:
            await action()
        except Exception:  # a scrape/health bug must not kill the loop that revives backends
            log.exception("periodic task failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval_s)
