"""Anthropic's ``/v1/messages`` through the gateway: scheduled as a generation, forwarded untouched but for the
engine plugin's ``vllm_xargs``, answered as the backend answered, its tokens counted in its own format."""

from __future__ import annotations

import asyncio

import httpx

from slosched.gateway.calls.call import CHAT, parse_call, parse_slo_headers
from tests.gateway.helpers import harness

BODY = {"model": "tiny", "max_tokens": 6, "messages": [{"role": "user", "content": "hello"}], "system": "brief"}


def test_a_message_and_a_message_stream_are_served_counted_and_learned() -> None:
    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            slo = {"x-slo-deadline-ms": "5000"}
            r = await client.post("/v1/messages", json=BODY, headers=slo)
            assert r.status_code == 200, r.text
            assert r.json()["type"] == "message" and r.json()["usage"]["output_tokens"] == 6
            async with client.stream("POST", "/v1/messages", json={**BODY, "stream": True}, headers=slo) as s:
                assert s.status_code == 200 and s.headers["content-type"].startswith("text/event-stream")
                streamed = b"".join([chunk async for chunk in s.aiter_bytes()])
            assert streamed.count(b"event: content_block_delta") == 6 and streamed.endswith(b'"message_stop"}\n\n')
            sent = [forwarded for stub in h.stubs for path, forwarded in stub.received if path == "/v1/messages"]
            assert len(sent) == 2 and {key: sent[0][key] for key in BODY} == BODY  # the client's fields, untouched
            assert "slosched_deadline_unix_s" in sent[0]["vllm_xargs"]  # vLLM passes them to the engine plugin
            assert "priority" not in sent[1] and "stream_options" not in sent[1]  # fields its request lacks
            assert h.value("slosched:requests_total", outcome="completed", reason="ok") == 2
            probe = parse_call(CHAT, {"messages": [{"role": "user", "content": "x"}]}, parse_slo_headers({}), 0.0, 64)
            assert h.gateway.dispatcher.context.output_predictor.predict(probe.request) == 6.0  # both taught 6

    asyncio.run(scenario())


def test_a_bad_message_is_a_400_naming_the_field_and_a_backend_error_passes_through() -> None:
    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            r = await client.post("/v1/messages", json={**BODY, "max_tokens": None})
            assert r.status_code == 400 and r.json()["error"]["param"] == "max_tokens", r.text
            r = await client.post("/v1/messages", json={**BODY, "messages": [{"role": "user", "content": 7}]})
            assert r.status_code == 400 and r.json()["error"]["param"] == "messages[0].content", r.text
            assert "7" not in r.json()["error"]["message"]
            for stub in h.stubs:
                stub.behaviour.status = 400
            r = await client.post("/v1/messages", json=BODY)
            assert r.status_code == 400 and r.json()["error"]["message"] == "stub failure"
            r = await client.post("/v1/messages/count_tokens", json={"model": "tiny", "messages": BODY["messages"]})
            assert r.status_code == 404  # forwarded: this stub does not serve it, and says so
            assert h.terminal_total() == h.value("slosched:requests_accepted_total")  # nothing accepted is lost

    asyncio.run(scenario())
