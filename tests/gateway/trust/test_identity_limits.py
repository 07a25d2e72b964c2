"""Issue 25: small defects of identity and limits, each against a real gateway (in process)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from slosched.gateway.calls.call import COMPLETIONS, parse_call, parse_slo_headers
from tests.gateway.helpers import harness

TENANTS = {
    "proxy": {"api_keys": ["sk-proxy"], "act_as": ["*"], "priority": 5, "min_slo_s": 1.0, "max_concurrency": 2},
    "slow": {"api_keys": ["sk-slow"], "token_rate_limit_tps": 40, "max_concurrency": 1},
}


def test_the_trailing_slash_never_redirects_to_the_clients_host() -> None:
    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            r = await client.get("/v1/models/", headers={"host": "evil.example"})
            assert r.status_code == 200 and "evil.example" not in r.text and "location" not in r.headers
            r = await client.post("/v1/jobs/", json={"kind": "workflow"}, headers={"host": "evil.example"})
            assert r.status_code == 201 and "location" not in r.headers, r.text

    asyncio.run(scenario())


def test_act_as_an_unconfigured_tenant_keeps_the_callers_class_floor_and_limit() -> None:
    async def scenario() -> None:
        async with harness(tenants=TENANTS) as h, httpx.AsyncClient(base_url=h.url) as client:
            for stub in h.stubs:
                stub.behaviour.token_delay_s = 0.05
            headers = {"authorization": "Bearer sk-proxy", "x-tenant": "ghost", "x-slo-deadline-ms": "2"}
            body = {"prompt": "a", "max_tokens": 4}
            calls = (client.post("/v1/completions", json=body, headers=headers) for _ in range(6))
            replies = await asyncio.gather(*calls)
            assert sorted(r.status_code for r in replies).count(429) >= 4  # the caller's max_concurrency 2
            sent = [b for stub in h.stubs for _, b in stub.received]
            xargs = sent[0]["vllm_xargs"]
            assert xargs["slosched_tenant"] == "ghost" and xargs["slosched_priority"] == 5  # the caller's class
            deadline_s = xargs["slosched_deadline_unix_s"] - xargs["slosched_job_arrival_unix_s"]
            assert deadline_s >= 0.99  # the caller's 1 s floor, not 2 ms

    asyncio.run(scenario())


def test_stage_calls_count_against_the_tenants_limits() -> None:
    async def scenario() -> None:
        auth = {"authorization": "Bearer sk-slow"}
        async with harness(tenants=TENANTS) as h, httpx.AsyncClient(base_url=h.url, headers=auth) as client:
            job = (await client.post("/v1/jobs", json={"kind": "workflow", "slo_s": 30})).json()
            calls = [{"prompt": "a", "max_tokens": 30} for _ in range(4)]  # ~124 tokens against 40/s
            r = await client.post(f"/v1/jobs/{job['id']}/stages", json={"calls": calls})
            assert r.status_code == 429, r.text
            assert not [b for stub in h.stubs for _, b in stub.received]

    asyncio.run(scenario())


def test_a_relquery_template_accepted_at_submission_is_routed() -> None:
    """Checked at one token per 8 characters, estimated at one per 4 for routing: a template between the two
    (15,000 characters against a 2,048-token model) was accepted and every row failed."""

    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url, timeout=30) as client:
            body = {
                "kind": "relquery",
                "template": "x" * 15_000 + " {a}",
                "rows": [{"a": 1}, {"a": 2}],
                "params": {"max_tokens": 4},
            }
            created = await client.post("/v1/jobs", json=body)
            assert created.status_code == 201, created.text
            for _ in range(100):
                job = (await client.get(f"/v1/jobs/{created.json()['id']}")).json()
                if job["status"] != "running":
                    break
                await asyncio.sleep(0.05)
            assert job["status"] == "completed", job.get("reason")

    asyncio.run(scenario())


def test_made_up_tenant_names_do_not_multiply_the_callers_rate_limit() -> None:
    tenants = {"proxy": {"api_keys": ["sk-proxy"], "act_as": ["*"], "rate_limit_rps": 5}}

    async def scenario() -> None:
        async with harness(tenants=tenants) as h, httpx.AsyncClient(base_url=h.url) as client:
            passed = 0
            for index in range(30):
                headers = {"authorization": "Bearer sk-proxy", "x-tenant": f"ghost-{index % 3}"}
                r = await client.post("/v1/completions", json={"prompt": "a", "max_tokens": 1}, headers=headers)
                passed += r.status_code == 200
            assert passed <= 8, passed

    asyncio.run(scenario())


def test_two_replicas_cannot_both_admit_a_tenants_last_job(tmp_path: object) -> None:
    """Two gateways on one job store, a tenant allowed 2 open jobs: concurrent creates admit exactly 2."""
    import pathlib

    store = f"sqlite:///{pathlib.Path(str(tmp_path)) / 'jobs.sqlite3'}"
    tenants = {"t": {"api_keys": ["sk-t"], "max_jobs": 2}}

    async def scenario() -> None:
        async with (
            harness(tenants=tenants, job_store=store, replica="r1") as one,
            harness(tenants=tenants, job_store=store, replica="r2") as two,
        ):
            auth = {"authorization": "Bearer sk-t"}
            async with httpx.AsyncClient(headers=auth) as client:
                tries = [client.post(f"{h.url}/v1/jobs", json={"kind": "workflow"}) for h in (one, two) * 4]
                replies = await asyncio.gather(*tries)
            assert sorted(r.status_code for r in replies) == [201, 201] + [429] * 6

    asyncio.run(scenario())


def test_a_call_of_n_sequences_is_charged_for_each_and_teaches_one_s_output() -> None:
    """``n`` sequences take n x ``max_tokens`` of the tenant's token rate (one call of n=16 could otherwise
    take 16x its share), and the output belief learns one sequence's length, not the sum of n."""

    async def scenario() -> None:
        tenants = {name: {"api_keys": [f"sk-{name}"], "token_rate_limit_tps": 40} for name in ("one", "many")}
        async with harness(tenants=tenants) as h, httpx.AsyncClient(base_url=h.url) as client:
            for tenant, n, statuses in (("one", 1, [200, 200]), ("many", 16, [200, 429])):
                body, auth = {"prompt": "a", "max_tokens": 4, "n": n}, {"authorization": f"Bearer sk-{tenant}"}
                replies = [await client.post("/v1/completions", json=body, headers=auth) for _ in range(2)]
                assert [r.status_code for r in replies] == statuses, replies[-1].text
            assert len(replies[0].json()["choices"]) == 16 and replies[0].json()["usage"]["completion_tokens"] == 64
            dispatcher = h.gateway.dispatcher
            learned = parse_call(COMPLETIONS, {"prompt": "a", "max_tokens": 64}, parse_slo_headers({}), 0.0, 64)
            assert dispatcher.context.output_predictor.predict(learned.request) == pytest.approx(4.0)

    asyncio.run(scenario())


def test_a_streamed_call_of_n_choices_teaches_one_s_output_and_the_client_gets_every_choice() -> None:
    """A stream interleaves the n choices (one event per token of any): the gateway counts them all, from
    the usage chunk it asked for (and strips), and the belief learns one sequence's length."""

    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            body = {"prompt": "a", "max_tokens": 6, "n": 4, "stream": True}
            text = (await client.post("/v1/completions", json=body)).text
            events = [line for line in text.split("\n\n") if line.startswith("data: {")]
            assert len(events) == 24 and '"usage"' not in text and text.endswith("data: [DONE]\n\n")
            learned = parse_call(COMPLETIONS, {"prompt": "a", "max_tokens": 64}, parse_slo_headers({}), 0.0, 64)
            assert h.gateway.dispatcher.context.output_predictor.predict(learned.request) == pytest.approx(6.0)

    asyncio.run(scenario())
