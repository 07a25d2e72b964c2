"""Issue 25: nothing a client sends reaches the engine unchecked. ``slosched_*`` extra arguments from a client
are refused (400 naming the field) on every entry point, and what the gateway forwards is its own decision
(the operator's tenant, class and floors), signed for the plugin."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from slosched.contract import XARG_SIGNATURE, XARGS, verify_xargs, xargs_key
from tests.gateway.helpers import harness

TENANTS = {
    "acme": {"api_keys": ["sk-acme"], "priority": 2, "min_ttft_slo_s": 0.2, "min_slo_s": 1.0},
    "gold": {"api_keys": ["sk-gold"], "priority": 0},
}
AUTH = {"authorization": "Bearer sk-acme"}
ENGINE_FIELDS = sorted(XARGS)


@pytest.mark.parametrize("field", ENGINE_FIELDS)
def test_engine_fields_are_refused_on_every_entry_point(field: str) -> None:
    async def scenario() -> None:
        async with harness(tenants=TENANTS) as h, httpx.AsyncClient(base_url=h.url, headers=AUTH) as client:
            xargs = {field: 1e-6, "other_plugin": 1}
            relquery = {"kind": "relquery", "template": "q {a}", "rows": [{"a": 1}], "params": {"vllm_xargs": xargs}}
            bodies: list[tuple[str, dict[str, Any]]] = [
                ("/v1/completions", {"prompt": "a", "max_tokens": 2, "vllm_xargs": xargs}),
                ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}], "vllm_xargs": xargs}),
                ("/v1/jobs", relquery),
            ]
            job = (await client.post("/v1/jobs", json={"kind": "workflow", "slo_s": 30})).json()
            stage = {"calls": [{"prompt": "a", "max_tokens": 2, "vllm_xargs": xargs}]}
            bodies.append((f"/v1/jobs/{job['id']}/stages", stage))
            for path, body in bodies:
                r = await client.post(path, json=body)
                assert r.status_code == 400, (path, r.text)
                assert field in r.json()["error"]["message"], r.text
            assert not [b for stub in h.stubs for _, b in stub.received]

    asyncio.run(scenario())


def test_forwarded_fields_are_the_gateways_decision_and_signed() -> None:
    async def scenario() -> None:
        async with harness(tenants=TENANTS) as h, httpx.AsyncClient(base_url=h.url, headers=AUTH) as client:
            headers = {"x-slo-ttft-ms": "0.001", "x-tenant": "acme"}
            body = {"prompt": "a", "max_tokens": 2, "priority": -100, "vllm_xargs": {"other_plugin": 1}}
            r = await client.post("/v1/completions", json=body, headers=headers)
            assert r.status_code == 200, r.text
            (_, sent), *_ = [item for stub in h.stubs for item in stub.received]
            xargs = sent["vllm_xargs"]
            assert xargs["other_plugin"] == 1 and "priority" not in sent  # the client's vLLM priority is dropped
            assert (xargs["slosched_tenant"], xargs["slosched_priority"], xargs["slosched_ttft_slo_s"]) == (
                "acme",
                2,
                0.2,
            )
            key = xargs_key()
            assert key is not None and XARG_SIGNATURE in xargs
            assert verify_xargs(xargs, key, f"cmpl-{xargs['slosched_request_id']}") is None

    asyncio.run(scenario())
