"""The gateway in front of two real vLLM CPU servers (tiny models of 2 and 8 layers)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from slosched.client.sdk import AsyncClient, WorkflowRunner
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.devtools.stub import free_port, serve_app
from slosched.devtools.up import ServerAddress, gateway_config
from slosched.gateway.calls.call import CHAT, COMPLETIONS, parse_call, parse_slo_headers
from slosched.gateway.http.app import Gateway
from slosched.gateway.ops.config import parse_config
from tests.gateway.helpers import Harness

pytestmark = pytest.mark.vllm


@contextlib.asynccontextmanager
async def live(
    servers: list[ServerAddress], extra_urls: tuple[str, ...] = (), **policies: Any
) -> AsyncIterator[Harness]:
    config = gateway_config(servers, **policies)
    config["backends"] += [{"name": f"dead{i}", "url": url, "model": "tiny"} for i, url in enumerate(extra_urls)]
    config.update(scrape_interval_s=0.2, health_interval_s=0.5)
    gateway = Gateway(parse_config(config))
    async with serve_app(gateway.app, lifespan="on") as url:
        yield Harness(url, gateway, [], [s.url for s in servers])


def test_completions_chat_and_streaming(vllm_servers: list[ServerAddress]) -> None:
    async def scenario() -> None:
        async with live(vllm_servers) as h, httpx.AsyncClient(base_url=h.url, timeout=120) as client:
            r = await client.post("/v1/completions", json={"prompt": "hello", "max_tokens": 6, "ignore_eos": True})
            assert r.status_code == 200, r.text
            assert r.json()["usage"]["completion_tokens"] == 6
            chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "ignore_eos": True}
            r = await client.post("/v1/chat/completions", json=chat)
            assert r.status_code == 200 and r.json()["choices"][0]["message"]["role"] == "assistant"
            events: list[dict[str, Any]] = []
            streamed = {**chat, "stream": True, "max_tokens": 20, "stream_options": {"include_usage": True}}
            async with client.stream("POST", "/v1/chat/completions", json=streamed) as s:
                assert s.status_code == 200
                async for line in s.aiter_lines():
                    if line.startswith("data: {"):
                        events.append(json.loads(line[6:]))
            # vLLM may put several tokens in one event when the engine outpaces the stream: count tokens
            # with the usage event, and check the content came in several events, not one buffered body.
            assert events[-1]["usage"]["completion_tokens"] == 20
            assert sum(1 for e in events if e["choices"] and e["choices"][0]["delta"].get("content")) >= 3
            assert h.value("slosched:requests_total", outcome="completed", reason="ok") == 3

    asyncio.run(scenario())


def test_tokenize_and_detokenize_are_forwarded_to_a_real_server(vllm_servers: list[ServerAddress]) -> None:
    async def scenario() -> None:
        async with live(vllm_servers) as h, httpx.AsyncClient(base_url=h.url, timeout=120) as client:
            r = await client.post("/tokenize", json={"prompt": "hello world, hello gateway"})
            assert r.status_code == 200, r.text
            tokens = r.json()["tokens"]
            assert r.json()["count"] == len(tokens) > 1
            r = await client.post("/detokenize", json={"tokens": tokens})
            assert r.status_code == 200, r.text
            assert "hello" in r.json()["prompt"]
            assert h.value("slosched:requests_total", outcome="completed", reason="ok") == 2

    asyncio.run(scenario())


def test_a_batch_of_prompts_with_n_choices_is_one_sequence_s_lesson(vllm_servers: list[ServerAddress]) -> None:
    """Two prompts x n=2 on a real server: four choices, usage summed over them by vLLM; the gateway's
    output belief learns one sequence's length (``Call.sequences``), not the sum."""

    async def scenario() -> None:
        async with live(vllm_servers) as h, httpx.AsyncClient(base_url=h.url, timeout=120) as client:
            body = {"prompt": ["hello world", "hello gateway"], "max_tokens": 6, "n": 2, "ignore_eos": True}
            r = await client.post("/v1/completions", json=body)
            assert r.status_code == 200, r.text
            assert len(r.json()["choices"]) == 4 and r.json()["usage"]["completion_tokens"] == 24
            probe = parse_call(COMPLETIONS, {"prompt": "hi", "max_tokens": 64}, parse_slo_headers({}), 0.0, 64)
            assert h.gateway.dispatcher.context.output_predictor.predict(probe.request) == 6.0
            # Streamed, vLLM interleaves the choices' events: every one reaches the client, the usage the
            # gateway asked for does not, and the call counts all of them but is timed per sequence.
            streamed = {**body, "stream": True, "max_tokens": 5}
            async with client.stream("POST", "/v1/completions", json=streamed) as s:
                text = "".join([chunk async for chunk in s.aiter_text()])
            events = [json.loads(line[6:]) for line in text.split("\n\n") if line.startswith("data: {")]
            assert sorted(e["choices"][0]["index"] for e in events) == sorted(list(range(4)) * 5), text
            assert '"usage"' not in text and h.value("slosched:generation_tokens_total") == 24 + 20
            assert h.value("slosched:request_time_per_output_token_seconds_count") == 1

    asyncio.run(scenario())


def test_anthropic_messages_and_their_stream_on_a_real_server(vllm_servers: list[ServerAddress]) -> None:
    """vLLM's own ``/v1/messages`` through the gateway: a message, and a stream counted in Anthropic's events."""

    async def scenario() -> None:
        async with live(vllm_servers) as h, httpx.AsyncClient(base_url=h.url, timeout=120) as client:
            model = (await client.get("/v1/models")).json()["data"][0]["id"]
            body = {
                "model": model,
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "hi"}],
                "ignore_eos": True,
            }
            r = await client.post("/v1/messages", json=body, headers={"x-slo-deadline-ms": "60000"})
            assert r.status_code == 200, r.text
            assert r.json()["type"] == "message" and r.json()["usage"]["output_tokens"] == 5
            async with client.stream("POST", "/v1/messages", json={**body, "stream": True, "max_tokens": 12}) as s:
                assert s.status_code == 200
                streamed = b"".join([chunk async for chunk in s.aiter_bytes()])
            assert b"event: message_stop" in streamed and b'"output_tokens":12' in streamed
            assert h.value("slosched:requests_total", outcome="completed", reason="ok") == 2
            probe = parse_call(CHAT, {"messages": body["messages"]}, parse_slo_headers({}), 0.0, 64)
            assert h.gateway.dispatcher.context.output_predictor.predict(probe.request) == 8.5  # 5 and 12 learned

    asyncio.run(scenario())


def test_responses_and_follow_ups_on_the_server_that_stored_them(vllm_servers: list[ServerAddress]) -> None:
    """vLLM's own Responses API through the gateway, on two servers: each follow-up continues its response
    where vLLM stored it (elsewhere vLLM answers 404), read back there, its stream counted by its events."""

    async def scenario() -> None:
        async with (
            live(vllm_servers, router="round-robin") as h,
            httpx.AsyncClient(base_url=h.url, timeout=120) as client,
        ):
            body = {"input": "hi", "max_output_tokens": 5, "ignore_eos": True}
            first = await client.post("/v1/responses", json=body, headers={"x-slo-deadline-ms": "60000"})
            assert first.status_code == 200, first.text
            assert first.json()["usage"]["output_tokens"] == 5
            previous = first.json()["id"]
            for _ in range(2):  # round-robin would send the second one elsewhere: vLLM there would answer 404
                r = await client.post("/v1/responses", json={**body, "previous_response_id": previous})
                assert r.status_code == 200, r.text
                previous = r.json()["id"]
            streamed_body = {**body, "previous_response_id": previous, "stream": True, "max_output_tokens": 7}
            async with client.stream("POST", "/v1/responses", json=streamed_body) as s:
                assert s.status_code == 200
                streamed = b"".join([chunk async for chunk in s.aiter_bytes()])
            assert b"event: response.completed" in streamed and b'"output_tokens":7' in streamed
            r = await client.get(f"/v1/responses/{first.json()['id']}")
            assert r.status_code == 200 and r.json()["id"] == first.json()["id"], r.text
            assert h.value("slosched:requests_total", outcome="completed", reason="ok") == 4
            routed = [h.value("slosched:routed_total", backend=server.name) for server in vllm_servers]
            assert sorted(routed) == [0, 4]  # every call of the conversation on the server that stored it

    asyncio.run(scenario())


def test_routing_across_both_servers_scraping_and_priority(vllm_servers: list[ServerAddress]) -> None:
    async def scenario() -> None:
        async with live(vllm_servers, router="least-loaded", engine="chunked-fcfs") as h:
            async with httpx.AsyncClient(base_url=h.url, timeout=120) as client:
                # Long enough to span several scrapes (0.2 s apart) even on a fast, idle machine.
                body = {"prompt": [100 + i for i in range(30)], "max_tokens": 512, "ignore_eos": True, "stream": True}
                headers = {"x-slo-deadline-ms": "60000"}
                tasks = [
                    asyncio.create_task(client.post("/v1/completions", json=body, headers=headers)) for _ in range(12)
                ]
                seen_running = 0.0
                while not all(task.done() for task in tasks):
                    await asyncio.sleep(0.05)
                    seen_running = max(seen_running, *(b.metrics.num_running for b in h.gateway.dispatcher.backends))
                assert all(task.result().status_code == 200 for task in tasks)
            routed = [h.value("slosched:routed_total", backend=s.name) for s in vllm_servers]
            # Every attempt is routed: on a slow machine a first byte later than the predicted bound is
            # retried on the other server (a correct retry, not a lost call), so count those too.
            retried = h.value("slosched:retries_total")
            assert all(count >= 1 for count in routed) and sum(routed) == 12 + retried
            assert seen_running >= 1  # vllm:num_requests_running scraped while requests ran
            assert all(b.metrics.scraped_s >= 0 for b in h.gateway.dispatcher.backends)
            # priority + vllm_xargs were forwarded and accepted (servers run --scheduling-policy priority)
            assert h.value("slosched:slo_total", kind="deadline", met="true") == 12

    asyncio.run(scenario())


def test_dead_backend_is_skipped_with_real_servers(vllm_servers: list[ServerAddress]) -> None:
    async def scenario() -> None:
        dead = f"http://127.0.0.1:{free_port()}"
        async with live(vllm_servers, (dead,), router="round-robin") as h:
            async with httpx.AsyncClient(base_url=h.url, timeout=120) as client:
                body = {"prompt": "x", "max_tokens": 4, "ignore_eos": True}
                results = await asyncio.gather(*(client.post("/v1/completions", json=body) for _ in range(6)))
            assert all(r.status_code == 200 for r in results)
            assert not h.gateway.dispatcher.backends[2].healthy
            assert h.terminal_total() == h.value("slosched:requests_accepted_total") == 6

    asyncio.run(scenario())


def test_job_api_and_trace_replay(vllm_servers: list[ServerAddress]) -> None:
    async def scenario() -> None:
        async with live(vllm_servers, router="least-tokens", engine="chunked-fcfs", job="deadline") as h:
            jobs = [
                JobSpec(
                    id=f"w{i}",
                    kind=JobKind.WORKFLOW,
                    arrival_s=0.2 * i,
                    slo_s=60.0,
                    template="t",
                    stages=(
                        StageSpec("plan", (CallSpec(40, 12),)),
                        StageSpec("tool", tool_duration_s=0.05),
                        StageSpec("sql", (CallSpec(60, 9), CallSpec(50, 7))),
                    ),
                )
                for i in range(3)
            ]
            async with AsyncClient(h.url) as client:
                results = await WorkflowRunner(client).replay(jobs)
                assert [r.status for r in results] == ["completed"] * 3 and all(r.slo_met for r in results)
                state = await client.job(results[0].job_id)
            tokens = [[res["output_tokens"] for res in stage["results"]] for stage in state["stages"]]
            assert tokens == [[12], [9, 7]]  # ignore_eos + max_tokens reproduce the trace's lengths exactly
            assert h.value("slosched:jobs_total", kind="workflow", outcome="completed") == 3

    asyncio.run(scenario())
