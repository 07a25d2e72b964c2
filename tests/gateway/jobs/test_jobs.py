"""Job API against stub backends: workflows stage by stage, relQueries, budgets, terminal states."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.gateway.helpers import harness


def test_workflow_stages_run_and_job_completes_with_budgets() -> None:
    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            job = (await client.post("/v1/jobs", json={"kind": "workflow", "slo_s": 30, "template": "t"})).json()
            assert job["status"] == "running"
            calls = [
                {"prompt": "a", "max_tokens": 3},
                {"messages": [{"role": "user", "content": "b"}], "max_tokens": 2},
            ]
            answer = (await client.post(f"/v1/jobs/{job['id']}/stages", json={"name": "s1", "calls": calls})).json()
            assert [r["outcome"] for r in answer["results"]] == ["completed", "completed"]
            assert answer["results"][0]["text"] == "x x x "
            answer = (
                await client.post(
                    f"/v1/jobs/{job['id']}/stages", json={"name": "s2", "calls": calls[:1], "final": True}
                )
            ).json()
            assert answer["job"]["status"] == "completed" and answer["job"]["slo_met"] is True
            bodies = [body for stub in h.stubs for _, body in stub.received]
            assert len(bodies) == 3
            # The job deadline reached every call (deadline policy: budget = time left).
            assert all(0 < body["vllm_xargs"]["slosched_budget_s"] <= 30 for body in bodies)
            assert {body["vllm_xargs"]["slosched_job_id"] for body in bodies} == {job["id"]}
            late = await client.post(f"/v1/jobs/{job['id']}/stages", json={"calls": calls})
            assert late.status_code == 409
            assert h.value("slosched:jobs_total", kind="workflow", outcome="completed") == 1

    asyncio.run(scenario())


async def _run_to_end(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """Submit a job and poll it until it is no longer running (at most ~4 s)."""
    job = (await client.post("/v1/jobs", json=body)).json()
    for _ in range(200):
        state: dict[str, Any] = (await client.get(f"/v1/jobs/{job['id']}")).json()
        if state["status"] != "running":
            break
        await asyncio.sleep(0.02)
    return state


def test_relquery_runs_every_row() -> None:
    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            rows = [{"name": f"n{i}", "n": i} for i in range(10)]
            body = {
                "kind": "relquery",
                "slo_s": 20,
                "template": "Describe {name} ({n})",
                "rows": rows,
                "params": {"max_tokens": 2},
            }
            state = await _run_to_end(client, body)
            assert state["status"] == "completed"
            results = state["stages"][0]["results"]
            assert len(results) == 10 and all(r["outcome"] == "completed" for r in results)
            prompts = sorted(body["prompt"] for stub in h.stubs for _, body in stub.received)
            assert prompts[0] == "Describe n0 (0)"

    asyncio.run(scenario())


def test_relquery_in_fields_order_sends_repeated_fields_first_and_answers_in_table_order() -> None:
    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            genres = ["drama", "comedy", "drama", "comedy", "drama", "drama"]
            rows = [{"title": f"t{i}", "genre": genre} for i, genre in enumerate(genres)]
            body = {
                "kind": "relquery",
                "slo_s": 20,
                "template": "Is it a drama?\nTitle: {title}\nGenre: {genre}",
                "rows": rows,
                "params": {"max_tokens": 1},
                "order": "fields",
            }
            state = await _run_to_end(client, body)
            assert state["status"] == "completed"
            assert all(result["outcome"] == "completed" for result in state["stages"][0]["results"])
            prompts = [body["prompt"] for stub in h.stubs for _, body in stub.received]
            # The genre line leads every prompt (it repeats; titles do not).
            assert all(prompt.startswith("Is it a drama?\nGenre: ") for prompt in prompts)
            wrong = dict(body, template="Is {title} a {genre}?")
            response = await client.post("/v1/jobs", json=wrong)
            assert response.status_code == 400 and "record form" in response.text
            response = await client.post("/v1/jobs", json={"kind": "workflow", "order": "rows"})
            assert response.status_code == 400 and "order" in response.text

    asyncio.run(scenario())


def test_row_plan_sends_rows_sorted_by_their_leading_values() -> None:
    from slosched.gateway.jobs.body import RowPlan, record_lines

    rows = [{"a": "y", "b": "1"}, {"a": "x", "b": "2"}, {"a": "y", "b": "0"}]
    assert RowPlan("{a}/{b}", rows, {}).sequence() == [0, 1, 2]
    assert RowPlan("{a}/{b}", rows, {}, "rows").sequence() == [1, 2, 0]
    fields = RowPlan("Q\nB: {b}\nA: {a}", rows, {}, "fields")
    assert fields.sent_template() == "Q\nA: {a}\nB: {b}"  # a repeats ('y' twice), b never does
    assert fields.sequence() == [1, 2, 0]
    assert fields.body(0)["prompt"] == "Q\nA: y\nB: 1"
    assert RowPlan("Q\nB: {b}\nA: {a}", rows, {}, "fields").as_state()["order"] == "fields"
    assert record_lines("A: {a}\nB: {b}") is None  # no instruction line


def test_job_errors_are_4xx_and_idle_jobs_are_cancelled() -> None:
    async def scenario() -> None:
        overrides: dict[str, Any] = {"timeouts": {"job_idle_s": 0.2, "queue_s": 5.0}}
        async with harness(**overrides) as h, httpx.AsyncClient(base_url=h.url) as client:
            bad = [
                {"kind": "nope"},
                {"kind": "workflow", "slo_s": -1},
                {"kind": "relquery", "template": "{x}", "rows": []},
                {"kind": "relquery", "template": "{x}", "rows": [{"y": 1}]},
                {"kind": "relquery", "template": "{x.__class__}", "rows": [{"x": 1}]},
            ]
            for body in bad[:-1]:
                response = await client.post("/v1/jobs", json=body)
                assert response.status_code == 400, (body, response.text)
            # Only {column} placeholders are substituted: attribute lookups stay literal text.
            literal = (await client.post("/v1/jobs", json=bad[-1])).json()
            for _ in range(100):
                if (await client.get(f"/v1/jobs/{literal['id']}")).json()["status"] != "running":
                    break
                await asyncio.sleep(0.02)
            assert any(body["prompt"] == "{x.__class__}" for stub in h.stubs for _, body in stub.received)
            assert (await client.get("/v1/jobs/missing")).status_code == 404
            job = (await client.post("/v1/jobs", json={"kind": "workflow"})).json()
            for _ in range(100):
                state = (await client.get(f"/v1/jobs/{job['id']}")).json()
                if state["status"] != "running":
                    break
                await asyncio.sleep(0.05)
            assert state["status"] == "cancelled" and state["reason"] == "idle timeout"
            assert h.value("slosched:jobs_total", kind="workflow", outcome="cancelled") == 1

    asyncio.run(scenario())
