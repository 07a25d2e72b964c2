"""Job-level admission at the gateway (``gateway/dispatch/admission.py``): a direct call or a job stage the
job layer finds unable to make its deadline is relegated (served as best effort), or, when the client asked
for it, refused at once with a 503 ``deadline_infeasible`` before anything is accepted."""

from __future__ import annotations

import asyncio

import httpx

from tests.gateway.helpers import harness

# The stack's job layer (critical-path) finds a call hopeless when even the fastest backend, alone, needs more
# than its deadline: 2,000 output tokens cannot be produced in 1 ms on any GPU the hardware tables know.
_HOPELESS = {"x-slo-deadline-ms": "1", "x-slo-if-infeasible": "reject"}
_BODY = {"prompt": "hello", "max_tokens": 2000}
_STACK = {"stack": "slosched"}
_BACKENDS = {"gpu": "A100-80G", "model": "Llama-3-8B"}


def test_a_call_that_asked_is_refused_early_and_nothing_runs() -> None:
    async def scenario() -> None:
        async with harness(policies=_STACK, backend=_BACKENDS) as h, httpx.AsyncClient(base_url=h.url) as client:
            r = await client.post("/v1/completions", json=_BODY, headers=_HOPELESS)
            assert r.status_code == 503, r.text
            error = r.json()["error"]
            assert error["type"] == "deadline_infeasible" and "deadline" in error["message"]
            assert h.value("slosched:requests_accepted_total") == 0  # refused before it was accepted
            assert sum(len(stub.received) for stub in h.stubs) == 0
            assert h.value("slosched:admission_rejections_total", reason="deadline_infeasible") == 1

    asyncio.run(scenario())


def test_without_asking_it_is_relegated_and_served() -> None:
    async def scenario() -> None:
        async with harness(policies=_STACK, backend=_BACKENDS) as h, httpx.AsyncClient(base_url=h.url) as client:
            headers = {"x-slo-deadline-ms": "1"}
            r = await client.post("/v1/completions", json={"prompt": "hello", "max_tokens": 3}, headers=headers)
            assert r.status_code == 200, r.text
            forwarded = [body for stub in h.stubs for _, body in stub.received]
            assert forwarded[-1]["vllm_xargs"]["slosched_best_effort"] == 1  # the engine serves it after the rest

    asyncio.run(scenario())


def test_a_feasible_call_that_asked_is_served() -> None:
    async def scenario() -> None:
        async with harness(policies=_STACK, backend=_BACKENDS) as h, httpx.AsyncClient(base_url=h.url) as client:
            headers = {"x-slo-deadline-ms": "600000", "x-slo-if-infeasible": "reject"}
            r = await client.post("/v1/completions", json={"prompt": "hello", "max_tokens": 3}, headers=headers)
            assert r.status_code == 200, r.text

    asyncio.run(scenario())


def test_a_bad_header_value_names_the_header_and_the_choices() -> None:
    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            r = await client.post("/v1/completions", json=_BODY, headers={"x-slo-if-infeasible": "drop"})
            assert r.status_code == 400
            message = r.json()["error"]["message"]
            assert "x-slo-if-infeasible" in message and "['relegate', 'reject']" in message

    asyncio.run(scenario())


def test_a_job_stage_that_asked_is_refused_and_the_job_goes_on() -> None:
    async def scenario() -> None:
        async with harness(policies=_STACK, backend=_BACKENDS) as h, httpx.AsyncClient(base_url=h.url) as client:
            job = (await client.post("/v1/jobs", json={"kind": "workflow", "slo_s": 0.001})).json()
            stage = {"calls": [_BODY], "if_infeasible": "reject"}
            r = await client.post(f"/v1/jobs/{job['id']}/stages", json=stage)
            assert r.status_code == 503 and r.json()["error"]["type"] == "deadline_infeasible", r.text
            assert h.value("slosched:requests_accepted_total") == 0
            r = await client.post(f"/v1/jobs/{job['id']}/stages", json={"calls": [{"prompt": "hi", "max_tokens": 2}]})
            assert r.status_code == 200, r.text  # without asking: relegated, served
            r = await client.post(f"/v1/jobs/{job['id']}/stages", json={"calls": [_BODY], "if_infeasible": "drop"})
            assert r.status_code == 400 and "if_infeasible" in r.json()["error"]["message"]

    asyncio.run(scenario())


def test_with_the_backlog_judgement_the_gateways_views_feed_the_demand_test() -> None:
    """``backlog: true`` reads the gateway's own views (queues, outstanding decode tokens, KV sizes) for the
    per-call and the demand tests: an idle gateway serves a feasible call that asked, refuses a hopeless
    one, and a workflow stage is judged (and booked) the same way."""
    policies = {**_STACK, "stack_params": {"backlog": True}}

    async def scenario() -> None:
        async with harness(policies=policies, backend=_BACKENDS) as h, httpx.AsyncClient(base_url=h.url) as client:
            # The hopeless call first: served calls teach the output-length predictor that outputs are short.
            r = await client.post("/v1/completions", json=_BODY, headers=_HOPELESS)
            assert r.status_code == 503 and r.json()["error"]["type"] == "deadline_infeasible", r.text
            ok = {"x-slo-deadline-ms": "600000", "x-slo-if-infeasible": "reject"}
            r = await client.post("/v1/completions", json={"prompt": "hello", "max_tokens": 3}, headers=ok)
            assert r.status_code == 200, r.text
            job = (await client.post("/v1/jobs", json={"kind": "workflow", "slo_s": 600.0})).json()
            stage = {"calls": [{"prompt": "hi", "max_tokens": 2}], "if_infeasible": "reject"}
            r = await client.post(f"/v1/jobs/{job['id']}/stages", json=stage)
            assert r.status_code == 200, r.text

    asyncio.run(scenario())
