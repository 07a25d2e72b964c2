"""A harness of fault-injecting fake vLLM backends (``slosched.devtools.faulty``, served in-process) behind a
real gateway, for the ejection, disconnect, timeout and terminal-state tests.

Each backend's modes are ``FAULT_MODES`` (``none``, ``error500``, ``hang``, ``invalid``, ``reset``, ``break``,
``slow_stream``, ``slow_first_byte``); tests switch them with ``backend.fault.set(...)`` and read
``backend.calls`` / ``backend.disconnected``. ``/health`` always says OK: only calls see the faults.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from slosched.devtools.faulty import Fault, FaultyBackend
from slosched.devtools.stub import serve_app
from slosched.gateway.http.app import Gateway
from slosched.gateway.ops.config import parse_config
from slosched.gateway.ops.prometheus import counter_value
from tests.gateway.helpers import stub_config


@dataclass
class FaultyHarness:
    url: str
    gateway: Gateway
    backends: list[FaultyBackend]

    def value(self, name: str, **labels: str) -> float:
        return counter_value(self.gateway.dispatcher.metrics, name, tuple(labels.items()))

    def outcomes(self) -> dict[str, float]:
        result: dict[str, float] = {}
        for family in self.gateway.dispatcher.metrics.registry.collect():
            for sample in family.samples:
                if sample.name == "slosched:requests_total" and sample.value:
                    key = f"{sample.labels['outcome']}/{sample.labels['reason']}"
                    result[key] = result.get(key, 0.0) + sample.value
        return result

    def idle(self) -> bool:
        return all(not q.waiting and q.num_running == 0 for q in self.gateway.dispatcher.queues)

    async def settle(self, timeout_s: float = 10.0) -> None:
        """Wait until every accepted call has its terminal outcome and the queues are empty."""
        async with asyncio.timeout(timeout_s):
            while not (self.idle() and sum(self.outcomes().values()) == self.value("slosched:requests_accepted_total")):
                await asyncio.sleep(0.01)


# Quick failure detection for tests: hung calls are abandoned after ~0.3 s, ejections last 0.5 s.
FAST = {
    "timeouts": {
        "queue_s": 5.0,
        "first_byte_s": 30.0,
        "first_byte_min_s": 0.3,
        "first_byte_factor": 1.0,
        "read_s": 2.0,
        "connect_s": 1.0,
        "health_s": 1.0,
    },
    "ejection": {"consecutive_failures": 3, "base_s": 0.5, "max_s": 4.0},
}


@contextlib.asynccontextmanager
async def faulty_harness(
    modes: list[str], models: list[str] | None = None, **overrides: Any
) -> AsyncIterator[FaultyHarness]:
    """Faulty backends (one per entry of ``modes``, named f0, f1, ...; ``models``: each one's served model,
    default all "tiny") behind a gateway; the slow modes wait 0.2 s unless a test sets ``fault.delay_s``."""
    backends = [FaultyBackend(f"f{index}", Fault(mode, delay_s=0.2)) for index, mode in enumerate(modes)]
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(serve_app(backend.app())) for backend in backends]
        config = stub_config(urls, **{**FAST, **overrides})
        for entry, model in zip(config["backends"], models or [], strict=False):
            entry["model"] = model
        gateway = Gateway(parse_config(config))
        url = await stack.enter_async_context(serve_app(gateway.app, lifespan="on"))
        yield FaultyHarness(url, gateway, backends)
