"""End to end, per dialect: an agent using the plain ``openai`` client (its ``extra_body`` /
``extra_headers``) or httpx sends a multi-call workflow with another stack's fields through the real
gateway app in front of stub vLLM backends; the calls are scheduled as ONE job with one deadline, seen three
ways: ``GET /v1/jobs/{id}``, the ``Request`` the dispatcher built, and the signed ``vllm_xargs`` the
backends received (the same job id and absolute deadline on every call)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from slosched.contract import XARG_DEADLINE_UNIX_S, XARG_JOB_ID, XARG_SESSION_ID
from tests.gateway.helpers import Harness, harness

openai = pytest.importorskip("openai")

TENANTS = {"acme": {"api_keys": ["sk-acme"], "priority": 1}}
AUTH = {"authorization": "Bearer sk-acme"}
MESSAGES = [{"role": "user", "content": "plan the fix"}]


def forwarded(h: Harness) -> list[dict[str, Any]]:
    """The ``vllm_xargs`` every backend received, in arrival order across backends."""
    return [body.get("vllm_xargs", {}) for stub in h.stubs for _, body in stub.received]


async def job_status(h: Harness, job_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=h.url, headers=AUTH) as client:
        response = await client.get(f"/v1/jobs/{job_id}")
        assert response.status_code == 200, response.text
        return dict(response.json())


def one_job(xargs: list[dict[str, Any]], job_id: str) -> None:
    assert {x[XARG_JOB_ID] for x in xargs} == {job_id}
    assert len({x[XARG_DEADLINE_UNIX_S] for x in xargs}) == 1  # one absolute deadline for every call


def test_vllm_router_program_tree_through_the_openai_client() -> None:
    async def scenario() -> None:
        async with harness(num_stubs=2, tenants=TENANTS) as h:
            client = openai.AsyncOpenAI(base_url=h.url + "/v1", api_key="sk-acme", max_retries=0)
            lead = {"program_id": "lead", "deadline_seconds": 120, "expected_output_length": 4}
            await client.chat.completions.create(
                model="tiny", messages=MESSAGES, max_tokens=4, extra_body={"vllm_xargs": {"agentic_context": lead}}
            )
            await asyncio.sleep(0.05)  # a tool call
            for sub in ("tests", "docs"):
                context = {"program_id": sub, "parent_program_id": "lead", "root_program_id": "lead"}
                await client.completions.create(
                    model="tiny", prompt="go", max_tokens=3, extra_body={"vllm_xargs": {"agentic_context": context}}
                )
            await client.close()
            job = await job_status(h, "lead")
            assert (job["kind"], job["dialect"], job["calls"], job["slo_s"]) == ("session", "vllm-router", 3, 120)
            assert job["programs"] == {"tests": "lead", "docs": "lead"} and 0 < job["deadline_in_s"] <= 120
            xargs = forwarded(h)
            one_job(xargs, "acme/lead")
            assert sorted(x[XARG_SESSION_ID] for x in xargs) == ["docs", "lead", "tests"]  # each program's KV key
            assert all("agentic_context" not in x for x in xargs)

    asyncio.run(scenario())


def test_dynamo_session_headers_and_agent_hints_through_the_openai_client() -> None:
    async def scenario() -> None:
        async with harness(num_stubs=1, tenants=TENANTS) as h:
            client = openai.AsyncOpenAI(base_url=h.url + "/v1", api_key="sk-acme", max_retries=0)
            hints = {"nvext": {"agent_hints": {"priority": 5, "osl": 3}}}
            turns = [{"x-dynamo-session-id": "run-7"}] * 2 + [
                {"x-dynamo-session-id": "run-7:researcher", "x-dynamo-parent-session-id": "run-7"}
            ]
            for headers in turns:
                await client.chat.completions.create(
                    model="tiny", messages=MESSAGES, max_tokens=3, extra_headers=headers, extra_body=hints
                )
            await client.close()
            job = await job_status(h, "run-7")
            assert (job["dialect"], job["calls"], job["programs"]) == ("dynamo", 3, {"run-7:researcher": "run-7"})
            xargs = forwarded(h)
            assert {x[XARG_JOB_ID] for x in xargs} == {"acme/run-7"}
            assert all(XARG_DEADLINE_UNIX_S not in x for x in xargs)  # Dynamo states no deadline: none
            assert all("nvext" not in body for _, body in h.stubs[0].received)

    asyncio.run(scenario())


def test_llm_d_headers_with_a_session_through_httpx() -> None:
    """llm-d names no job of its own; its SLO headers ride on a session the agent names (here the generic
    ``x-session-id``), and slosched's own deadline header gives the calls theirs."""

    async def scenario() -> None:
        async with harness(num_stubs=1, tenants=TENANTS) as h, httpx.AsyncClient(base_url=h.url) as client:
            headers = {
                **AUTH,
                "content-type": "application/json",
                "x-session-id": "agent-3",
                "x-llm-d-slo-ttft-ms": "800",
                "x-llm-d-slo-tpot-ms": "60",
                "x-llm-d-inference-objective": "interactive",
            }
            for _ in range(2):
                body = {"model": "tiny", "prompt": "step", "max_tokens": 2}
                response = await client.post("/v1/completions", json=body, headers=headers)
                assert response.status_code == 200, response.text
            job = await job_status(h, "agent-3")
            assert (job["dialect"], job["calls"]) == ("vllm-router", 2)
            xargs = forwarded(h)
            assert {x[XARG_JOB_ID] for x in xargs} == {"acme/agent-3"}
            assert {(x["slosched_ttft_slo_s"], x["slosched_tpot_slo_s"], x["slosched_stage"]) for x in xargs} == {
                (0.8, 0.06, "interactive")
            }

    asyncio.run(scenario())
