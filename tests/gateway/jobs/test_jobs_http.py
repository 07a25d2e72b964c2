"""The job API over HTTP for real tenants: ownership (404 for another tenant's job), unguessable ids,
strict bodies (400/413 naming the field, no echo, never 500, nothing leaked), and a 10,000-row relQuery
paced into the queues (no ``queue_full``) while ``/health`` stays responsive."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import httpx

from tests.gateway.helpers import harness

TENANTS = {"acme": {"api_keys": ["sk-acme"], "max_jobs": 3}, "zeta": {"api_keys": ["sk-zeta"]}}
ACME = {"Authorization": "Bearer sk-acme"}
ZETA = {"Authorization": "Bearer sk-zeta"}


async def wait_done(client: httpx.AsyncClient, job_id: str, headers: dict[str, str], timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = (await client.get(f"/v1/jobs/{job_id}", headers=headers)).json()
        if state["status"] != "running":
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"job {job_id} still running")


def test_jobs_belong_to_their_tenant() -> None:
    async def scenario() -> None:
        async with harness(tenants=TENANTS) as h, httpx.AsyncClient(base_url=h.url) as client:
            ids = []
            for _ in range(3):
                response = await client.post("/v1/jobs", json={"slo_s": 30}, headers=ACME)
                assert response.status_code == 201, response.text
                ids.append(response.json()["id"])
            assert all(re.fullmatch(r"job-[A-Za-z0-9_-]{20,}", job_id) for job_id in ids) and len(set(ids)) == 3
            full = await client.post("/v1/jobs", json={}, headers=ACME)
            assert full.status_code == 429 and full.headers["retry-after"] == "1"
            assert (await client.post("/v1/jobs", json={}, headers=ZETA)).status_code == 201  # not affected
            job = ids[0]
            for method, path, body in (
                ("GET", f"/v1/jobs/{job}", None),
                ("DELETE", f"/v1/jobs/{job}", None),
                ("POST", f"/v1/jobs/{job}/stages", {"calls": [{"prompt": "x"}]}),
                ("POST", f"/v1/jobs/{job}/complete", None),
            ):
                foreign = await client.request(method, path, json=body, headers=ZETA)
                missing = await client.request(method, path.replace(job, "job-nope"), json=body, headers=ZETA)
                assert foreign.status_code == missing.status_code == 404, (method, path, foreign.text)
                assert foreign.json()["error"]["type"] == missing.json()["error"]["type"] == "not_found"
            assert (await client.get(f"/v1/jobs/{job}", headers=ACME)).json()["status"] == "running"
            assert (await client.post(f"/v1/jobs/{job}/complete", headers=ACME)).json()["status"] == "completed"
            assert (await client.get(f"/v1/jobs/{job}", headers=ACME)).json()["status"] == "completed"
            assert (await client.post("/v1/jobs", json={}, headers=ACME)).status_code == 201  # room again

    asyncio.run(scenario())


def test_bad_bodies_are_4xx_naming_the_field_and_leak_nothing() -> None:
    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            cases: list[tuple[str, int, str]] = [
                ('{"slo_s": 1e306}', 400, "slo_s"),
                ('{"slo_s": ' + "9" * 400 + "}", 400, "slo_s"),
                ('{"slo_s": Infinity}', 400, "slo_s"),
                (
                    '{"kind": "relquery", "template": "{a}", "rows": [{"a": 1}], "params": {"max_tokens": 1'
                    + "0" * 400
                    + "}}",
                    400,
                    "params.max_tokens",
                ),
                (json.dumps({"template": "t" * 3_900_000}), 400, "template"),
                (
                    json.dumps({"kind": "relquery", "template": "{a}" + "y" * 99_000, "rows": [{"a": 1}] * 1_000}),
                    413,
                    "rows",
                ),
            ]
            for body, status, field in cases:
                response = await client.post("/v1/jobs", content=body, headers={"content-type": "application/json"})
                assert response.status_code == status, (body[:80], response.text[:200])
                message = response.json()["error"]["message"]
                # Integers too long for any number are refused by the JSON parser already ("body").
                assert message.startswith((f"{field}:", "body: invalid JSON (an integer")), message
                assert len(response.content) < 1_000  # never an echo of the input
            job = (await client.post("/v1/jobs", json={"slo_s": 60})).json()
            mixed = {"calls": [{"prompt": "ok", "max_tokens": 2}, {"prompt": "x", "max_tokens": 10**30}]}
            response = await client.post(f"/v1/jobs/{job['id']}/stages", json=mixed)
            assert response.status_code == 400 and "calls[1].max_tokens" in response.text
            good = {"calls": [{"prompt": "ok", "max_tokens": 2}], "final": True}
            response = await client.post(f"/v1/jobs/{job['id']}/stages", json=good)
            assert response.json()["job"]["status"] == "completed"
            assert h.value("slosched:requests_accepted_total") == h.terminal_total() == 1
            assert sum(len(stub.received) for stub in h.stubs) == 1

    asyncio.run(scenario())


def test_ten_thousand_rows_are_paced_and_health_stays_responsive(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/jobs.sqlite3"

    async def scenario() -> None:
        overrides: dict[str, Any] = {"backend": {"max_concurrency": 32, "max_queue": 64}, "job_store": store}
        async with (
            harness(**overrides) as h,
            httpx.AsyncClient(base_url=h.url, limits=httpx.Limits(max_connections=4), timeout=30) as client,
        ):
            rows = [{"n": index} for index in range(10_000)]
            body = {"kind": "relquery", "template": "row {n}", "rows": rows, "params": {"max_tokens": 1}}
            started = time.monotonic()
            job = (await client.post("/v1/jobs", json=body)).json()
            health: list[float] = []
            while True:
                sent = time.monotonic()
                assert (await client.get("/health")).status_code == 200
                health.append(time.monotonic() - sent)
                state = (await client.get(f"/v1/jobs/{job['id']}")).json()
                if state["status"] != "running":
                    break
                assert time.monotonic() - started < 120
                await asyncio.sleep(0.05)
            elapsed = time.monotonic() - started
            assert state["status"] == "completed", state["reason"]
            outcomes = h.outcomes()
            assert outcomes == {"completed/ok": 10_000.0}, outcomes  # no queue_full, nothing else
            assert h.value("slosched:requests_accepted_total") == h.terminal_total() == 10_000
            health.sort()
            print(
                f"10k rows in {elapsed:.1f}s; /health p50 {health[len(health) // 2] * 1e3:.0f} ms "
                f"max {health[-1] * 1e3:.0f} ms over {len(health)} probes"
            )
            assert health[len(health) // 2] < 0.1 and health[-1] < 0.5

    asyncio.run(scenario())


def test_unknown_model_in_a_stage_or_relquery_is_a_404_before_any_call_runs() -> None:
    async def scenario() -> None:
        async with harness(tenants=TENANTS) as h, httpx.AsyncClient(base_url=h.url) as client:
            job = (await client.post("/v1/jobs", json={"kind": "workflow", "slo_s": 30}, headers=ACME)).json()
            stage = {"calls": [{"prompt": "ok", "max_tokens": 2}, {"prompt": "x", "model": "nope", "max_tokens": 2}]}
            r = await client.post(f"/v1/jobs/{job['id']}/stages", json=stage, headers=ACME)
            assert r.status_code == 404 and "calls[1]" in r.json()["error"]["message"], r.text
            body = {"kind": "relquery", "slo_s": 30, "template": "{a}", "rows": [{"a": 1}], "params": {"model": "nope"}}
            r = await client.post("/v1/jobs", json=body, headers=ACME)
            assert r.status_code == 404 and "rows[0]" in r.json()["error"]["message"], r.text
            assert h.value("slosched:requests_accepted_total") == 0

    asyncio.run(scenario())
