"""The live half of ``slosched bench fairness``: ``slosched serve`` (a real process) in front of stub backends,
tenant interactive's traffic calm and under tenant batch's 3,000-row relQuery, with and without tenant weights.

Attainment of the interactive tenant: the share of its calls answered 200 within their deadline and of its
workflows completed within their SLO (a 429 counts as missed). The flooder's own figure: the share of its rows
answered ``completed`` once the relQuery ended (or after ``LIVE_FLOOD_WAIT_S``).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from slosched.bench.fairness.setup import (
    LIVE_BACKENDS,
    LIVE_CALLS_PER_WAVE,
    LIVE_DEADLINE_MS,
    LIVE_FLOOD_ROWS,
    LIVE_FLOOD_SLO_S,
    LIVE_FLOOD_WAIT_S,
    LIVE_KEYS,
    LIVE_MAX_CONCURRENCY,
    LIVE_MAX_QUEUE,
    LIVE_MAX_WAIT_S,
    LIVE_PRIORITIES,
    LIVE_WAVE_INTERVAL_S,
    LIVE_WAVES,
    LIVE_WEIGHTS,
    LIVE_WORKFLOW_SLO_S,
)
from slosched.devtools.gateway_process import gateway_process
from slosched.devtools.stub import StubBehaviour, stubs_in_thread
from slosched.experiment import FloodFigures


def gateway_config(urls: list[str], weights: bool) -> dict[str, Any]:
    """The gateway in front of ``urls``: two tenants, with their weights and bands (fair sharing) or without
    (fcfs)."""
    tenants: dict[str, dict[str, Any]] = {name: {"api_keys": [key]} for name, key in LIVE_KEYS.items()}
    if weights:
        for name, weight in LIVE_WEIGHTS.items():
            tenants[name] |= {"weight": weight, "priority": LIVE_PRIORITIES[name]}
    backends = [
        {"name": f"b{i}", "url": url, "max_concurrency": LIVE_MAX_CONCURRENCY, "max_queue": LIVE_MAX_QUEUE}
        for i, url in enumerate(urls)
    ]
    config = {
        "backends": backends,
        "tenants": tenants,
        "job_store": "memory://",
        "health_interval_s": 0.5,
        "timeouts": {"queue_s": 30.0},
    }
    return config | ({"fair_share": {"max_wait_s": LIVE_MAX_WAIT_S}} if weights else {})


def _headers(tenant: str) -> dict[str, str]:
    return {"authorization": f"Bearer {LIVE_KEYS[tenant]}"}


async def interactive_attainment(client: httpx.AsyncClient) -> float:
    """Tenant interactive's waves of calls, each wave with one two-stage workflow: the share that met its SLO."""
    headers = {**_headers("interactive"), "x-slo-deadline-ms": str(LIVE_DEADLINE_MS)}

    async def call(index: int) -> bool:
        start = time.monotonic()
        body = {"prompt": f"hello {index}", "max_tokens": 4}
        response = await client.post("/v1/completions", json=body, headers=headers)
        return response.status_code == 200 and time.monotonic() - start <= LIVE_DEADLINE_MS / 1000

    async def workflow() -> bool:
        created = await client.post(
            "/v1/jobs", json={"kind": "workflow", "slo_s": LIVE_WORKFLOW_SLO_S}, headers=headers
        )
        job = created.json()
        if "id" not in job:
            return False
        for name, final in (("generate", False), ("check", True)):
            stage = {"name": name, "calls": [{"prompt": "x", "max_tokens": 4}] * 2, "final": final}
            await client.post(f"/v1/jobs/{job['id']}/stages", json=stage, headers=headers)
        status = (await client.get(f"/v1/jobs/{job['id']}", headers=headers)).json()
        return status.get("status") == "completed" and bool(status.get("slo_met"))

    async def wave(index: int) -> list[bool]:
        # Waves start on a clock, not after the previous one ends: a wave stuck behind the flood must not push
        # the later ones past it, or the figure would say how long the flood lasted rather than who it cost.
        await asyncio.sleep(index * LIVE_WAVE_INTERVAL_S)
        calls = (call(index * LIVE_CALLS_PER_WAVE + i) for i in range(LIVE_CALLS_PER_WAVE))
        return list(await asyncio.gather(*calls, workflow()))

    met = [ok for outcome in await asyncio.gather(*(wave(i) for i in range(LIVE_WAVES))) for ok in outcome]
    return sum(met) / len(met)


async def _flooder_attainment(client: httpx.AsyncClient, job_id: str) -> float:
    """The share of the relQuery's rows answered ``completed``, once it ended (or after the wait bound)."""
    deadline = time.monotonic() + LIVE_FLOOD_WAIT_S
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = (await client.get(f"/v1/jobs/{job_id}", headers=_headers("batch"))).json()
        if status.get("status") != "running":
            break
        await asyncio.sleep(0.25)
    rows = (status.get("stages") or [{}])[0].get("results") or []
    return sum(bool(row) and row.get("outcome") == "completed" for row in rows) / LIVE_FLOOD_ROWS


async def calm_and_flood(url: str) -> tuple[float, float, float]:
    """(calm attainment, attainment during the flood, the flooder's own) against the gateway at ``url``."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        calm = await interactive_attainment(client)
        rows = [{"r": str(i)} for i in range(LIVE_FLOOD_ROWS)]
        params = {"max_tokens": 4}
        body = {"kind": "relquery", "slo_s": LIVE_FLOOD_SLO_S, "template": "Row {r}", "rows": rows, "params": params}
        response = await client.post("/v1/jobs", json=body, headers=_headers("batch"))
        if response.status_code not in (200, 201, 202):
            raise RuntimeError(f"the flood's relQuery was refused: {response.status_code} {response.text[:200]}")
        await asyncio.sleep(0.5)  # the rows fill the queues
        flood = await interactive_attainment(client)
        return calm, flood, await _flooder_attainment(client, response.json()["id"])


def live_flood(work_dir: Path | None = None) -> FloodFigures:
    """One live run: stubs in a thread, ``slosched serve`` with weights then without, the same traffic."""
    results: dict[bool, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="slosched-fairness-") as scratch:
        work = work_dir or Path(scratch)
        behaviour = StubBehaviour(token_delay_s=0.005, default_tokens=4)
        with stubs_in_thread(LIVE_BACKENDS, behaviour) as urls:
            for weights in (True, False):
                path = work / f"gateway-{'fair' if weights else 'fcfs'}.yaml"
                path.write_text(yaml.safe_dump(gateway_config(urls, weights)))
                with gateway_process(path) as url:
                    results[weights] = asyncio.run(calm_and_flood(url))
    (calm_fair, flood_fair, flooder_fair), (calm_fcfs, flood_fcfs, flooder_fcfs) = results[True], results[False]
    return FloodFigures("batch", calm_fair, flood_fair, calm_fcfs, flood_fcfs, flooder_fair, flooder_fcfs)
