"""Engine state for the picker: every endpoint's Prometheus ``/metrics``, polled on an interval.

The text is read by the gateway's own parser (``parse_vllm_metrics``: vLLM's queue, running and KV gauges, plus
the slosched plugin's exported engine state) into the backend's ``metrics``, and the queues then admit
against the new KV usage (``SlotSet.refresh_queues``), exactly as after a gateway scrape. The picker has no
health route of its own to call: a scrape that fails marks the endpoint down (not routed until it has been
down ``retry_down_after_s``, then probed by one pick, as in the gateway), the next one that succeeds marks it up.

``fetch`` is injectable: tests hand in canned expositions instead of HTTP servers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import httpx

from slosched.gateway.backends.backend import parse_vllm_metrics
from slosched.gateway.dispatch.retired import RetiredBackend
from slosched.picker.pool import EndpointPool

log = logging.getLogger("slosched.picker")

Fetch = Callable[[str], Awaitable[str]]


class HttpFetch:
    """GET a URL's text with one pooled httpx client; a status other than 200 is an error."""

    __slots__ = ("_client",)

    def __init__(self, timeout_s: float) -> None:
        self._client = httpx.AsyncClient(timeout=timeout_s)

    async def __call__(self, url: str) -> str:
        response = await self._client.get(url)
        if response.status_code != 200:
            raise httpx.HTTPStatusError(f"HTTP {response.status_code}", request=response.request, response=response)
        return response.text

    async def aclose(self) -> None:
        await self._client.aclose()


async def scrape_pool(pool: EndpointPool, fetch: Fetch) -> int:
    """Scrape every endpoint once (concurrently); returns how many answered."""
    slots = pool.slots
    if slots is None:
        return 0
    backends = [backend for backend in slots.backends if not isinstance(backend, RetiredBackend)]
    results = await asyncio.gather(*(_scrape_one(pool, backend.name, fetch) for backend in backends))
    now_s = pool.clock()
    answered = 0
    for backend, text in zip(backends, results, strict=True):
        if isinstance(text, Exception):
            backend.mark_down(f"metrics scrape: {type(text).__name__}")
            continue
        try:
            metrics = parse_vllm_metrics(text)
        except ValueError as error:
            backend.mark_down(f"metrics scrape: unparsable ({str(error)[:60]})")
            continue
        metrics.scraped_s = now_s
        backend.metrics = metrics
        backend.mark_up()
        answered += 1
    if pool.slots is slots:  # not swapped for a new endpoint list meanwhile
        slots.refresh_queues()
    return answered


async def _scrape_one(pool: EndpointPool, address: str, fetch: Fetch) -> str | Exception:
    endpoint = pool.endpoints.get(address)
    path = endpoint.metrics_path if endpoint is not None else "/metrics"
    try:
        return await fetch(f"http://{address}{path}")
    except Exception as error:  # any transport or status failure is the endpoint's, never the loop's
        log.debug("scrape of %s failed: %s", address, error)
        return error
