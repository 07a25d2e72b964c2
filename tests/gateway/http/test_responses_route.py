"""OpenAI's Responses API through the gateway: scheduled as a generation, counted in its own stream format,
and every follow-up (``previous_response_id``, a read, a cancel) sent to the backend that stored the response,
for the tenant that made it only."""

from __future__ import annotations

import asyncio

import httpx

from tests.gateway.helpers import harness

TENANTS = {"a": {"api_keys": ["sk-a"]}, "b": {"api_keys": ["sk-b"]}}
A, B = {"authorization": "Bearer sk-a"}, {"authorization": "Bearer sk-b"}


def test_follow_ups_reads_and_cancels_go_to_the_backend_that_stored_the_response() -> None:
    async def scenario() -> None:
        overrides = {"tenants": TENANTS, "policies": {"router": "round-robin"}}
        async with harness(**overrides) as h, httpx.AsyncClient(base_url=h.url, headers=A) as client:
            first = await client.post("/v1/responses", json={"model": "tiny", "input": "hi", "max_output_tokens": 5})
            assert first.status_code == 200 and first.json()["usage"]["output_tokens"] == 5, first.text
            owner = next(stub for stub in h.stubs if first.json()["id"] in stub.responses)
            for _ in range(3):  # round-robin alone would alternate; each follow-up is pinned to the owner
                body = {"input": "more", "previous_response_id": first.json()["id"], "max_output_tokens": 3}
                r = await client.post("/v1/responses", json=body)
                assert r.status_code == 200, r.text
            async with client.stream("POST", "/v1/responses", json={**body, "stream": True}) as s:
                streamed = b"".join([chunk async for chunk in s.aiter_bytes()])
            assert s.status_code == 200 and streamed.count(b"event: response.output_text.delta") == 3
            made = [path for path, _ in owner.received]
            assert made.count("/v1/responses") == 5  # the first and its four follow-ups, the stream included
            streamed_id = next(i for i in owner.responses if i.encode() in streamed)  # the stream's id was kept
            r = await client.get(f"/v1/responses/{streamed_id}")
            assert r.status_code == 200 and r.json()["status"] == "completed", r.text
            async with client.stream("GET", f"/v1/responses/{streamed_id}", params={"stream": "true"}) as s:
                replayed = b"".join([chunk async for chunk in s.aiter_bytes()])
            assert s.headers["content-type"].startswith("text/event-stream")
            assert replayed.count(b"event: response.output_text.delta") == 3 and b"response.completed" in replayed
            r = await client.post(f"/v1/responses/{first.json()['id']}/cancel")
            assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
            assert h.value("slosched:requests_total", outcome="completed", reason="ok") == 5
            assert h.gateway.dispatcher.context.output_predictor.predict(_probe()) == (5 + 3 * 4) / 5

    asyncio.run(scenario())


def test_another_tenant_or_an_unknown_id_gets_a_404_naming_the_field() -> None:
    async def scenario() -> None:
        async with harness(tenants=TENANTS) as h, httpx.AsyncClient(base_url=h.url) as client:
            made = await client.post("/v1/responses", json={"input": "secret"}, headers=A)
            assert made.status_code == 200, made.text
            stored = made.json()["id"]
            for path, method in ((f"/v1/responses/{stored}", "GET"), (f"/v1/responses/{stored}/cancel", "POST")):
                r = await client.request(method, path, headers=B)
                assert r.status_code == 404 and r.json()["error"]["param"] == "response_id", r.text
            r = await client.post("/v1/responses", json={"input": "x", "previous_response_id": stored}, headers=B)
            assert r.status_code == 404 and r.json()["error"]["param"] == "previous_response_id", r.text
            r = await client.get("/v1/responses/resp_unknown", headers=A)
            assert r.status_code == 404 and r.json()["error"]["type"] == "response_not_found"
            unstored = await client.post("/v1/responses", json={"input": "x", "store": False}, headers=A)
            assert unstored.status_code == 200 and len(h.gateway.app.hot.owners) == 1  # only the stored one is kept
            r = await client.post("/v1/responses", json={"input": "x", "background": True}, headers=A)
            assert r.status_code == 400 and r.json()["error"]["param"] == "background"
            assert r.headers["content-type"].startswith("application/json")
            sent = [path for stub in h.stubs for path, _ in stub.received]
            assert sent == ["/v1/responses"] * 2  # nothing else reached a backend
            assert h.terminal_total() == h.value("slosched:requests_accepted_total")  # nothing accepted is lost

    asyncio.run(scenario())


def _probe():  # type: ignore[no-untyped-def]
    from slosched.gateway.calls.call import CHAT, parse_call, parse_slo_headers

    return parse_call(CHAT, {"messages": [{"role": "user", "content": "x"}]}, parse_slo_headers({}), 0.0, 64).request
