"""Issue 25: the SDK names a tenant the way the gateway reads it (``contract.tenant_header``), for every job
operation, and a replay of a multi-tenant trace runs every job as its tenant."""

from __future__ import annotations

import asyncio

from slosched.client.sdk import AsyncClient
from tests.gateway.helpers import harness

TENANTS = {
    "proxy": {"api_keys": ["sk-proxy"], "act_as": ["batch", "chat"]},
    "batch": {"api_keys": ["sk-batch"]},
    "chat": {"api_keys": ["sk-chat"]},
}


def test_async_client_acts_for_a_tenant_through_a_whole_job() -> None:
    async def scenario() -> None:
        async with harness(tenants=TENANTS) as h, AsyncClient(h.url, api_key="sk-proxy") as client:
            job = await client.create_job("workflow", 30.0, tenant="batch")
            assert job["tenant"] == "batch", job
            call = {"prompt": "a", "max_tokens": 2}
            stage = await client.run_stage(job["id"], "s", [call], tenant="batch")
            assert stage["job"]["status"] == "running", stage
            assert (await client.complete_job(job["id"], tenant="batch"))["status"] == "completed"
            assert (await client.job(job["id"], tenant="batch"))["tenant"] == "batch"

    asyncio.run(scenario())
