"""vLLM's other JSON routes through the gateway: forwarded whole, answered as the backend answered, counted."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from slosched.gateway.calls.call import Call
from slosched.gateway.dispatch.slots import SlotSet
from tests.gateway.helpers import harness


def test_embeddings_and_tokenize_are_forwarded_whole_and_answered_as_the_backend_answered() -> None:
    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            body = {"model": "tiny", "input": ["alpha", "beta gamma"], "encoding_format": "float"}
            r = await client.post("/v1/embeddings", json=body, headers={"x-slo-deadline-ms": "5000"})
            assert r.status_code == 200, r.text
            assert [item["index"] for item in r.json()["data"]] == [0, 1]
            r = await client.post("/tokenize/", json={"model": "tiny", "prompt": "hello there"})
            assert r.status_code == 200 and r.json()["count"] == 3, r.text
            forwarded = [(path, sent) for stub in h.stubs for path, sent in stub.received]
            assert sorted(path for path, _ in forwarded) == ["/tokenize", "/v1/embeddings"]
            embedded = next(sent for path, sent in forwarded if path == "/v1/embeddings")
            assert {key: embedded[key] for key in body} == body  # the client's fields, untouched
            assert h.value("slosched:requests_total", outcome="completed", reason="ok") == 2

    asyncio.run(scenario())


def test_a_route_gets_only_the_scheduling_fields_its_vllm_request_reads() -> None:
    """vLLM's pooling requests take ``priority`` but carry no sampling parameters (so no ``vllm_xargs`` reach
    the plugin); (de)tokenizing takes neither. A field a route ignores is not sent (vLLM warns per request)."""

    async def scenario() -> None:
        async with harness(backend={"forward_priority": True}) as h, httpx.AsyncClient(base_url=h.url) as client:
            slo = {"x-slo-deadline-ms": "5000"}
            body = {"model": "tiny", "input": "alpha", "priority": 7, "vllm_xargs": {"mine": 1}}
            assert (await client.post("/v1/embeddings", json=body, headers=slo)).status_code == 200
            tokenize = {"model": "tiny", "prompt": "hi", "priority": 7}
            assert (await client.post("/tokenize", json=tokenize, headers=slo)).status_code == 200
            completion = {"prompt": "a", "max_tokens": 2}
            assert (await client.post("/v1/completions", json=completion, headers=slo)).status_code == 200
            sent = {path: forwarded for stub in h.stubs for path, forwarded in stub.received}
            embedded, tokenized, completed = sent["/v1/embeddings"], sent["/tokenize"], sent["/v1/completions"]
            # The gateway's EDF priority (milliseconds to the deadline, from the same 5 s), never the client's.
            assert abs(embedded["priority"] - completed["priority"]) < 1000 and embedded["priority"] != 7
            assert embedded["vllm_xargs"] == {"mine": 1}  # the client's own extra arguments, none of ours
            assert "priority" not in tokenized and "vllm_xargs" not in tokenized
            assert "slosched_deadline_unix_s" in completed["vllm_xargs"]

    asyncio.run(scenario())


def test_bad_calls_get_openai_errors_and_a_backend_error_passes_through() -> None:
    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            r = await client.post("/v1/embeddings", json={"model": "nope", "input": "x"})
            assert r.status_code == 404 and r.json()["error"]["param"] == "model"
            r = await client.post("/v1/embeddings", json={"model": ["tiny"], "input": "x"})
            assert r.status_code == 400 and r.json()["error"]["param"] == "model"
            r = await client.get("/v1/embeddings")
            assert r.status_code == 405 and "only POST" in r.json()["error"]["message"]
            r = await client.post("/v1/embeddings", content=b"[1, 2]", headers={"content-type": "application/json"})
            assert r.status_code == 400
            for stub in h.stubs:
                stub.behaviour.status = 400
            r = await client.post("/v1/embeddings", json={"model": "tiny", "input": "x"})
            assert r.status_code == 400 and r.json()["error"]["message"] == "stub failure"
            assert h.terminal_total() == h.value("slosched:requests_accepted_total")  # nothing accepted is lost

    asyncio.run(scenario())


def test_a_finished_embedding_teaches_no_belief(monkeypatch: pytest.MonkeyPatch) -> None:
    taught: list[str] = []
    learn = SlotSet.learn

    def recorded(self: SlotSet, call: Call, attempt: Any, now: float) -> None:
        taught.append(call.path)
        learn(self, call, attempt, now)

    monkeypatch.setattr(SlotSet, "learn", recorded)

    async def scenario() -> None:
        async with harness(num_stubs=1) as h, httpx.AsyncClient(base_url=h.url) as client:
            for _ in range(2):
                r = await client.post("/v1/embeddings", json={"model": "tiny", "input": "x " * 50})
                assert r.status_code == 200
            assert (await client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 3})).status_code == 200

    asyncio.run(scenario())
    assert taught == ["/v1/completions"]
