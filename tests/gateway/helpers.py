"""Start stub backends and a gateway in front of them, inside one event loop (tests run ``asyncio.run``)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from slosched.core.request import Request
from slosched.devtools.stub import StubBackend, serve_app
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.http.app import Gateway
from slosched.gateway.ops.config import parse_config
from slosched.gateway.ops.prometheus import counter_value


@dataclass
class Harness:
    url: str
    gateway: Gateway
    stubs: list[StubBackend]
    stub_urls: list[str]

    def value(self, name: str, **labels: str) -> float:
        return counter_value(self.gateway.dispatcher.metrics, name, tuple(labels.items()))

    def terminal_total(self) -> float:
        metrics = self.gateway.dispatcher.metrics
        total = 0.0
        for family in metrics.registry.collect():
            if family.name == "slosched:requests":
                total += sum(s.value for s in family.samples if s.name == "slosched:requests_total")
        return total

    def outcomes(self) -> dict[str, float]:
        result: dict[str, float] = {}
        for family in self.gateway.dispatcher.metrics.registry.collect():
            if family.name == "slosched:requests":
                for sample in family.samples:
                    if sample.name == "slosched:requests_total":
                        key = f"{sample.labels['outcome']}/{sample.labels['reason']}"
                        result[key] = result.get(key, 0.0) + sample.value
        return result


def stub_config(urls: list[str], **overrides: Any) -> dict[str, Any]:
    backend_overrides = overrides.pop("backend", {})
    config: dict[str, Any] = {
        "backends": [
            {"name": f"b{index}", "url": url, "max_concurrency": 4, "max_queue": 16, **backend_overrides}
            for index, url in enumerate(urls)
        ],
        "scrape_interval_s": 0.2,
        "health_interval_s": 0.2,
        "retry_down_after_s": 0.3,
        "timeouts": {"queue_s": 5.0, "first_byte_s": 5.0, "read_s": 5.0, "connect_s": 1.0, "health_s": 1.0},
        "job_store": "memory://",  # never the default SQLite file in the working directory
    }
    config.update(overrides)
    return config


@contextlib.asynccontextmanager
async def harness(num_stubs: int = 2, **overrides: Any) -> AsyncIterator[Harness]:
    stubs = [StubBackend(name=f"stub{index}") for index in range(num_stubs)]
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(serve_app(stub.app())) for stub in stubs]
        gateway = Gateway(parse_config(stub_config(urls, **overrides)))
        url = await stack.enter_async_context(serve_app(gateway.app, lifespan="on"))
        yield Harness(url, gateway, stubs, urls)


# Parameters without defaults (SABER's speed model, a fixed cap); hardware-aware policies need a GPU and
# model the hardware tables know, so the backends here claim one.
_ENGINE_PARAMS = {
    "saber": {"speed": {"kind": "usl", "lam": 87.0, "sigma": 0.02, "kappa": 0.0001}},
    "static-concurrency": {"cap": 2},
}


# Routers that need parameters to exist at all (a pipeline is its configuration).
_ROUTER_PARAMS: dict[str, dict[str, Any]] = {
    "pipeline": {"filters": ["kv-fits"], "scorers": [{"name": "least-tokens", "weight": 1}], "picker": "max"}
}


def offline_dispatcher(router: str = "round-robin", engine: str = "chunked-fcfs") -> Dispatcher:
    backends = [
        {
            "name": f"b{i}",
            "url": f"http://127.0.0.1:{9 + i}",
            "max_concurrency": 2,
            "gpu": "A100-80G",
            "model": "Llama-3-8B",
        }
        for i in range(3)
    ]
    policies = {
        "router": router,
        "router_params": _ROUTER_PARAMS.get(router, {}),
        "engine": engine,
        "engine_params": _ENGINE_PARAMS.get(engine, {}),
    }
    return Dispatcher(parse_config({"backends": backends, "policies": policies}))


def make_request(index: int, now: float, deadline_s: float = math.inf) -> Request:
    return Request(
        id=f"r{index}",
        job_id=f"j{index}",
        stage="s",
        template="t",
        prompt_tokens=50 + 10 * index,
        max_output_tokens=64,
        arrival_s=now,
        job_arrival_s=now,
        deadline_s=deadline_s,
        predicted_output_tokens=32.0,
    )


@contextlib.contextmanager
def background_gateway(**overrides: Any) -> Iterator[str]:
    """A stub-backed gateway on its own event loop in a daemon thread, for synchronous clients; yields its URL
    and shuts it down on exit."""
    ready = threading.Event()
    stop: list[asyncio.Event] = []
    url: list[str] = []

    async def run() -> None:
        async with harness(**overrides) as h:
            url.append(h.url)
            stop.append(asyncio.Event())
            ready.set()
            await stop[0].wait()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(run(),), daemon=True)
    thread.start()
    assert ready.wait(20), "gateway did not start"
    try:
        yield url[0]
    finally:
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(20)
