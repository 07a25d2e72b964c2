"""/status and /status.json: instances, requests, SLO attainment over a window, recent routing decisions;
the JSON guarded by operator keys (or like every route), the page served to anyone with a strict CSP."""

from __future__ import annotations

import asyncio
from collections import deque

import httpx

from slosched.contract import HEADER_DEADLINE_MS, HEADER_TENANT
from slosched.gateway.ops.status import MAX_DECISIONS, NUM_DECISIONS_SHOWN, SloResult, slo_rows
from tests.gateway.helpers import harness


def test_slo_rows_count_the_window_only() -> None:
    results: deque[SloResult] = deque(
        [
            (1.0, "a", 0.0, "ttft", False),
            (50.0, "a", 0.0, "ttft", True),
            (55.0, "a", 0.0, "ttft", False),
            (56.0, "b", 1.0, "deadline", True),
            (57.0, "a", 0.0, "ttft", True),
        ]
    )
    assert slo_rows(results, now_s=60.0, window_s=15.0) == [
        {"tenant": "a", "class": "0", "kind": "ttft", "met": 2, "missed": 1, "attainment": 2 / 3},
        {"tenant": "b", "class": "1", "kind": "deadline", "met": 1, "missed": 0, "attainment": 1.0},
    ]


def test_status_json_after_traffic() -> None:
    async def scenario() -> None:
        async with harness(num_stubs=2, trust_tenant_header=True) as h:
            async with httpx.AsyncClient(base_url=h.url, timeout=10) as client:
                headers = {HEADER_DEADLINE_MS: "60000", HEADER_TENANT: "gold"}
                for _ in range(MAX_DECISIONS + 10):
                    answer = await client.post(
                        "/v1/completions", json={"prompt": "p", "max_tokens": 2}, headers=headers
                    )
                    assert answer.status_code == 200
                status = (await client.get("/status.json")).json()
                page = await client.get("/status")
            assert [row["name"] for row in status["instances"]] == ["b0", "b1"]
            assert sum(row["routed"] for row in status["instances"]) == MAX_DECISIONS + 10
            assert all(row["healthy"] and not row["ejected"] for row in status["instances"])
            assert status["requests"]["outcomes"] == {"completed": MAX_DECISIONS + 10}
            assert status["slo"]["rows"] == [
                {
                    "tenant": "gold",
                    "class": "0",
                    "kind": "deadline",
                    "met": MAX_DECISIONS + 10,
                    "missed": 0,
                    "attainment": 1.0,
                }
            ]
            decisions = status["decisions"]
            assert len(decisions) == NUM_DECISIONS_SHOWN
            assert {d["backend"] for d in decisions} <= {"b0", "b1"} and decisions[0]["request"].startswith("req-")
            assert decisions[0]["time"] >= decisions[-1]["time"]  # newest first
            assert decisions[0]["reason"] == h.gateway.config.policies.router
            assert len(h.gateway.dispatcher.metrics.activity.decisions) == MAX_DECISIONS  # bounded
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
            assert "connect-src 'self'" in page.headers["content-security-policy"]
            assert b"status.json" in page.content and b"http" not in page.content.replace(b"HTTP ", b"")

    asyncio.run(scenario())


def test_status_json_needs_an_operator_key_when_configured() -> None:
    async def scenario() -> None:
        tenants = {"acme": {"api_keys": ["tenant-key"]}}
        async with harness(num_stubs=1, tenants=tenants, operator_api_keys=["op-key"]) as h:
            async with httpx.AsyncClient(base_url=h.url, timeout=10) as client:
                tenant = await client.get("/status.json", headers={"authorization": "Bearer tenant-key"})
                missing = await client.get("/status.json")
                operator = await client.get("/status.json", headers={"authorization": "Bearer op-key"})
                page = await client.get("/status")
            assert tenant.status_code == missing.status_code == 401
            assert tenant.json()["error"]["type"] == "unauthorized"
            assert operator.status_code == 200 and operator.json()["instances"][0]["name"] == "b0"
            assert page.status_code == 200  # the page holds no data

    asyncio.run(scenario())


def test_status_json_without_operator_keys_is_guarded_like_the_other_routes() -> None:
    async def scenario() -> None:
        async with harness(num_stubs=1, tenants={"acme": {"api_keys": ["tenant-key"]}}) as h:
            async with httpx.AsyncClient(base_url=h.url, timeout=10) as client:
                missing = await client.get("/status.json")
                tenant = await client.get("/status.json", headers={"authorization": "Bearer tenant-key"})
            assert missing.status_code == 401 and tenant.status_code == 200

    asyncio.run(scenario())
