"""Gateway core against stub backends: completions, chat, streaming, headers, forwarding, metrics."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from tests.gateway.helpers import harness


def _events(text: str) -> list[str]:
    return [line[6:] for line in text.splitlines() if line.startswith("data: ")]


def test_completion_and_chat_non_streaming() -> None:
    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            r = await client.post("/v1/completions", json={"prompt": "hello", "max_tokens": 5})
            assert r.status_code == 200, r.text
            assert r.json()["usage"]["completion_tokens"] == 5
            r = await client.post(
                "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
            )
            assert r.status_code == 200, r.text
            assert r.json()["choices"][0]["message"]["content"] == "x x x "
            assert h.value("slosched:requests_total", outcome="completed", reason="ok") == 2
            assert h.value("slosched:requests_accepted_total") == 2

    asyncio.run(scenario())


def test_streaming_passes_tokens_through_one_by_one() -> None:
    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            for stub in h.stubs:
                stub.behaviour.token_delay_s = 0.02
            arrivals: list[float] = []
            loop = asyncio.get_running_loop()
            body = {"prompt": "hello", "max_tokens": 10, "stream": True}
            async with client.stream("POST", "/v1/completions", json=body) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                text = ""
                async for chunk in response.aiter_text():
                    arrivals.append(loop.time())
                    text += chunk
            events = _events(text)
            assert events[-1] == "[DONE]" and len(events) == 11
            # Tokens arrive as they are produced, not buffered until the end.
            assert len(arrivals) >= 5 and arrivals[-1] - arrivals[0] > 0.1
            assert h.value("slosched:requests_total", outcome="completed", reason="ok") == 1

    asyncio.run(scenario())


def test_slo_headers_priority_and_xargs_are_forwarded() -> None:
    async def scenario() -> None:
        overrides: dict[str, Any] = {"backend": {"forward_priority": True}, "trust_tenant_header": True}
        async with harness(**overrides) as h, httpx.AsyncClient(base_url=h.url) as client:
            headers = {"x-slo-deadline-ms": "2000", "x-slo-ttft-ms": "500", "x-slo-tpot-ms": "100", "x-tenant": "t1"}
            r = await client.post("/v1/completions", json={"prompt": "a", "max_tokens": 2}, headers=headers)
            assert r.status_code == 200
            r = await client.post("/v1/completions", json={"prompt": "b", "max_tokens": 2})
            assert r.status_code == 200
            bodies = [body for stub in h.stubs for _, body in stub.received]
            with_deadline = next(b for b in bodies if b["prompt"] == "a")
            without = next(b for b in bodies if b["prompt"] == "b")
            xargs = with_deadline["vllm_xargs"]
            assert "slosched_deadline_unix_s" in xargs and "slosched_deadline_unix_s" not in without["vllm_xargs"]
            assert xargs["slosched_stage"] == "completion" and xargs["slosched_predicted_tokens"] > 0
            # EDF priority in vLLM: a request with a deadline goes before one without.
            assert with_deadline["priority"] < without["priority"]
            assert with_deadline["model"] == "tiny"
            assert h.value("slosched:slo_total", kind="deadline", met="true") == 1
            assert h.value("slosched:slo_total", kind="ttft", met="true") == 1

    asyncio.run(scenario())


def test_routing_spreads_load_and_metrics_endpoint() -> None:
    async def scenario() -> None:
        async with harness(policies={"router": "round-robin"}) as h, httpx.AsyncClient(base_url=h.url) as client:
            results = await asyncio.gather(
                *(client.post("/v1/completions", json={"prompt": "p", "max_tokens": 2}) for _ in range(8))
            )
            assert all(r.status_code == 200 for r in results)
            assert [len(stub.received) for stub in h.stubs] == [4, 4]
            await asyncio.sleep(0.3)  # one scrape
            text = (await client.get("/metrics")).text
            assert 'slosched:routed_total{backend="b0"} 4.0' in text
            assert "slosched:num_requests_waiting" in text and "slosched:num_requests_running" in text
            assert "slosched:e2e_request_latency_seconds_bucket" in text
            assert h.gateway.dispatcher.backends[0].metrics.scraped_s >= 0
            health = (await client.get("/health")).json()
            assert health["status"] == "ok" and set(health["backends"]) == {"b0", "b1"}

    asyncio.run(scenario())


def test_concurrency_window_queues_requests_in_engine_order() -> None:
    async def scenario() -> None:
        overrides = {"backend": {"max_concurrency": 1, "max_queue": 16}}
        async with harness(num_stubs=1, **overrides) as h, httpx.AsyncClient(base_url=h.url) as client:
            h.stubs[0].behaviour.token_delay_s = 0.01
            queue = h.gateway.dispatcher.queues[0]
            tasks = [
                asyncio.create_task(client.post("/v1/completions", json={"prompt": f"p{i}", "max_tokens": 5}))
                for i in range(4)
            ]
            await asyncio.sleep(0.02)
            assert queue.num_running == 1 and len(queue.waiting) == 3
            results = await asyncio.gather(*tasks)
            assert all(r.status_code == 200 for r in results)
            prompts = [body["prompt"] for _, body in h.stubs[0].received]
            assert prompts == ["p0", "p1", "p2", "p3"]  # fcfs through a window of one
            assert queue.num_running == 0 and not queue.waiting

    asyncio.run(scenario())


def test_unknown_policy_name_is_a_config_error() -> None:
    import pytest

    from slosched.core.errors import ConfigError
    from slosched.gateway.ops.config import parse_config

    with pytest.raises(ConfigError, match="router"):
        parse_config({"backends": [{"name": "a", "url": "http://x"}], "policies": {"router": "nope"}})
    assert json.dumps(parse_config({"backends": [{"name": "a", "url": "http://x"}]}).model_dump())


def test_models_are_listed_in_vllm_s_shape_with_their_context_limit() -> None:
    async def scenario() -> None:
        backend = {"max_model_len": 4096}
        async with harness(backend=backend) as h, httpx.AsyncClient(base_url=h.url) as client:
            listed = (await client.get("/v1/models")).json()
            assert listed["object"] == "list"
            (model,) = listed["data"]
            assert {key: model[key] for key in ("id", "object", "owned_by", "max_model_len")} == {
                "id": "tiny",
                "object": "model",
                "owned_by": "slosched",
                "max_model_len": 4096,
            }
            assert isinstance(model["created"], int) and model["created"] > 1_600_000_000

    asyncio.run(scenario())
