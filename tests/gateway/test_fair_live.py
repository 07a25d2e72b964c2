"""Done-when of fair sharing, live: ``slosched serve`` as a real process in front of stub backends, two tenants.

Tenant ``batch`` submits a 3,000-row relQuery; at the same time tenant ``interactive`` sends 40 calls and 5
workflows. With tenant weights its attainment stays within 5 points of the same traffic without the flood;
without weights (first come, first served) the rows take every queue place and its calls get 429s.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from slosched.devtools.stub import StubBackend, StubBehaviour, serve_app
from tests.gateway.http.test_server import gateway_process

DEADLINE_MS = 3000
KEYS = {"batch": "key-batch", "interactive": "key-interactive"}


@contextlib.contextmanager
def stubs_in_thread(count: int) -> Iterator[list[str]]:
    ready: queue.Queue[list[str]] = queue.Queue()
    stop = threading.Event()

    async def run() -> None:
        async with contextlib.AsyncExitStack() as stack:
            behaviour = StubBehaviour(token_delay_s=0.005, default_tokens=4)
            apps = [StubBackend(name=f"s{i}", behaviour=behaviour).app() for i in range(count)]
            ready.put([await stack.enter_async_context(serve_app(app)) for app in apps])
            while not stop.is_set():
                await asyncio.sleep(0.05)

    thread = threading.Thread(target=lambda: asyncio.run(run()), daemon=True)
    thread.start()
    try:
        yield ready.get(timeout=20)
    finally:
        stop.set()
        thread.join(10)


def _config(urls: list[str], weights: bool) -> dict[str, Any]:
    tenants = {name: {"api_keys": [key]} for name, key in KEYS.items()}
    if weights:
        tenants["batch"]["weight"] = 1
        tenants["interactive"]["weight"] = 4
    backends = [{"name": f"b{i}", "url": url, "max_concurrency": 8, "max_queue": 32} for i, url in enumerate(urls)]
    return {
        "backends": backends,
        "tenants": tenants,
        "job_store": "memory://",
        "health_interval_s": 0.5,
        "timeouts": {"queue_s": 30.0},
    }


async def _interactive(client: httpx.AsyncClient) -> float:
    """Attainment of 40 calls (in waves of 8) and 5 two-stage workflows of tenant interactive."""
    headers = {"authorization": f"Bearer {KEYS['interactive']}", "x-slo-deadline-ms": str(DEADLINE_MS)}

    async def call(index: int) -> bool:
        start = time.monotonic()
        body = {"prompt": f"hello {index}", "max_tokens": 4}
        response = await client.post("/v1/completions", json=body, headers=headers)
        return response.status_code == 200 and time.monotonic() - start <= DEADLINE_MS / 1000

    async def workflow() -> bool:
        job = (await client.post("/v1/jobs", json={"kind": "workflow", "slo_s": 10}, headers=headers)).json()
        if "id" not in job:
            return False
        for name, final in (("generate", False), ("check", True)):
            stage = {"name": name, "calls": [{"prompt": "x", "max_tokens": 4}] * 2, "final": final}
            await client.post(f"/v1/jobs/{job['id']}/stages", json=stage, headers=headers)
        status = (await client.get(f"/v1/jobs/{job['id']}", headers=headers)).json()
        return status.get("status") == "completed" and bool(status.get("slo_met"))

    met: list[bool] = []
    for wave in range(5):
        met += await asyncio.gather(*(call(wave * 8 + i) for i in range(8)), workflow())
    return sum(met) / len(met)


async def _run(url: str) -> tuple[float, float]:
    """(calm attainment, attainment while a 3,000-row relQuery of tenant batch runs)."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        calm = await _interactive(client)
        rows = [{"r": str(i)} for i in range(3000)]
        flood = {"kind": "relquery", "slo_s": 600, "template": "Row {r}", "rows": rows, "params": {"max_tokens": 4}}
        response = await client.post("/v1/jobs", json=flood, headers={"authorization": f"Bearer {KEYS['batch']}"})
        assert response.status_code in (200, 201, 202), response.text
        await asyncio.sleep(0.5)  # the rows fill the queues
        return calm, await _interactive(client)


@pytest.mark.slow
def test_a_flooding_tenant_costs_the_other_at_most_5_points_live(tmp_path: Path) -> None:
    results = {}
    with stubs_in_thread(2) as urls:
        for weights in (True, False):
            path = tmp_path / f"gw-{weights}.yaml"
            path.write_text(yaml.safe_dump(_config(urls, weights)))
            with gateway_process(path) as (_, url):
                results[weights] = asyncio.run(_run(url))
    (calm_fair, flood_fair), (calm_fcfs, flood_fcfs) = results[True], results[False]
    print(f"fair: {calm_fair:.3f} -> {flood_fair:.3f}; first come first served: {calm_fcfs:.3f} -> {flood_fcfs:.3f}")
    assert 100 * (calm_fair - flood_fair) <= 5.0, results
    assert 100 * (calm_fcfs - flood_fcfs) >= 20.0, results
