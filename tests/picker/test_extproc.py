"""The picker over a real gRPC server on localhost, driven by a client that speaks ext_proc as Envoy does."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import orjson
from envoy.config.core.v3 import base_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.picker.envoy import BUFFERED, FULL_DUPLEX, KEY, STREAMED, destination, exchange, prometheus, served

IDLE, BUSY, OTHER = "10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"
ENDPOINTS = [
    {"address": IDLE, "model": "llama", "gpu": "H100"},
    {"address": BUSY, "model": "llama", "gpu": "H100"},
    {"address": OTHER, "model": "qwen", "gpu": "A100"},
]
METRICS = {IDLE: prometheus(running=0), BUSY: prometheus(running=12, waiting=6, kv=0.9), OTHER: prometheus()}
CHAT = {"model": "llama", "messages": [{"role": "user", "content": "hello " * 200}], "max_tokens": 64}
OVERWRITE = base_pb2.HeaderValueOption.HeaderAppendAction.Value("OVERWRITE_IF_EXISTS_OR_ADD")


def run(config: dict[str, Any], scenario: Any, metrics: dict[str, str] | None = None) -> Any:
    async def main() -> Any:
        async with served({"endpoints": ENDPOINTS, **config}, METRICS if metrics is None else metrics) as (
            server,
            target,
        ):
            return await scenario(server, target)

    return asyncio.run(main())


def test_full_duplex_holds_the_headers_answer_until_the_body_is_whole_then_sends_it_back() -> None:
    async def scenario(server: Any, target: str) -> Any:
        raw = orjson.dumps(CHAT)
        answers = await exchange(target, FULL_DUPLEX, raw, chunks=3)
        assert [a.WhichOneof("response") for a in answers] == ["request_headers", "request_body"]
        assert destination(answers[0]) == (IDLE, IDLE)  # header and metadata agree
        headers = answers[0].request_headers.response
        assert headers.clear_route_cache
        assert {o.header.key: o.header.raw_value for o in headers.header_mutation.set_headers}["content-length"] == (
            str(len(raw)).encode()
        )
        assert all(o.append_action == OVERWRITE for o in headers.header_mutation.set_headers)
        streamed = answers[1].request_body.response.body_mutation.streamed_response
        assert streamed.body == raw and streamed.end_of_stream

    run({}, scenario)


def test_buffered_lets_the_headers_through_and_decides_on_the_body() -> None:
    async def scenario(server: Any, target: str) -> Any:
        answers = await exchange(target, BUFFERED, CHAT)
        assert [a.WhichOneof("response") for a in answers] == ["request_headers", "request_body"]
        assert destination(answers[0]) == (None, None)
        assert not answers[0].request_headers.response.header_mutation.set_headers
        assert destination(answers[1]) == (IDLE, IDLE)
        assert answers[1].request_body.response.clear_route_cache

    run({}, scenario)


def test_streamed_decides_at_the_headers_from_the_model_header_and_passes_each_chunk() -> None:
    async def scenario(server: Any, target: str) -> Any:
        body = {**CHAT, "model": "qwen"}
        answers = await exchange(target, STREAMED, body, headers={"x-gateway-model-name": "qwen"}, chunks=3)
        assert [a.WhichOneof("response") for a in answers] == ["request_headers"] + ["request_body"] * 3
        assert destination(answers[0]) == (OTHER, OTHER)
        assert all(not a.request_body.response.HasField("body_mutation") for a in answers[1:])

    run({}, scenario)


def test_the_slo_headers_reach_the_router_and_a_client_cannot_name_its_own_endpoint() -> None:
    async def scenario(server: Any, target: str) -> Any:
        headers = {"x-slo-deadline-ms": "1500", "x-job-id": "job-7", KEY: BUSY}
        answers = await exchange(target, FULL_DUPLEX, CHAT, headers=headers)
        assert destination(answers[0]) == (IDLE, IDLE)
        parsed = server.pool.parse("/v1/chat/completions", headers, orjson.dumps(CHAT))
        assert parsed.request.job_id == "job-7"
        assert abs(parsed.request.deadline_s - parsed.request.arrival_s - 1.5) < 1e-9

    run({}, scenario)


def _refusal(answers: list[Any]) -> tuple[int, dict[str, Any]]:
    assert answers[-1].HasField("immediate_response")
    immediate = answers[-1].immediate_response
    return immediate.status.code, orjson.loads(immediate.body)


def test_an_unknown_model_is_answered_404_as_gie_s_picker_answers_it() -> None:
    async def scenario(server: Any, target: str) -> Any:
        for mode in (FULL_DUPLEX, BUFFERED):
            status, body = _refusal(await exchange(target, mode, {**CHAT, "model": "gpt-9"}))
            assert status == 404 and body["error"]["type"] == "model_not_found"
        status, _ = _refusal(await exchange(target, STREAMED, CHAT, headers={"x-gateway-model-name": "gpt-9"}))
        assert status == 404

    run({}, scenario)


def test_a_bad_body_is_400_naming_the_field() -> None:
    async def scenario(server: Any, target: str) -> Any:
        status, body = _refusal(await exchange(target, FULL_DUPLEX, {**CHAT, "max_tokens": -1}))
        assert status == 400 and body["error"]["param"] == "max_tokens"
        status, _ = _refusal(await exchange(target, BUFFERED, b"{not json"))
        assert status == 400

    run({}, scenario)


def test_an_empty_pool_and_a_pool_of_dead_endpoints_are_503() -> None:
    async def empty(server: Any, target: str) -> Any:
        for mode in (FULL_DUPLEX, BUFFERED):
            status, body = _refusal(await exchange(target, mode, CHAT))
            assert status == 503 and body["error"]["type"] == "no_backend"
        immediate = (await exchange(target, FULL_DUPLEX, None, path="/v1/models"))[0].immediate_response
        assert immediate.status.code == 503
        assert {o.header.key: o.header.raw_value for o in immediate.headers.set_headers}["retry-after"] == b"1"

    run({"endpoints": []}, empty)

    async def dead(server: Any, target: str) -> Any:
        status, _ = _refusal(await exchange(target, FULL_DUPLEX, CHAT))
        assert status == 503

    run({"retry_down_after_s": 3600}, dead, metrics={OTHER: prometheus()})  # both llama endpoints fail scrapes


def test_the_proxy_s_subset_is_obeyed_and_an_empty_one_is_503() -> None:
    async def scenario(server: Any, target: str) -> Any:
        answers = await exchange(target, FULL_DUPLEX, CHAT, subset=[BUSY])
        assert destination(answers[0]) == (BUSY, BUSY)
        status, _ = _refusal(await exchange(target, FULL_DUPLEX, CHAT, subset=["10.9.9.9:8000"]))
        assert status == 503

    run({}, scenario)


def test_fallbacks_follow_the_primary_in_one_comma_separated_value() -> None:
    async def scenario(server: Any, target: str) -> Any:
        answers = await exchange(target, BUFFERED, CHAT)
        assert destination(answers[1]) == (f"{IDLE},{BUSY}", f"{IDLE},{BUSY}")

    run({"fallbacks": 2}, scenario)  # only two llama endpoints: one fallback


def test_a_pick_counts_at_its_endpoint_until_envoy_closes_the_stream() -> None:
    async def scenario(server: Any, target: str) -> Any:
        async with grpc.aio.insecure_channel(target) as channel:
            from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc

            from tests.picker.envoy import body_message, headers_message

            call = pb_grpc.ExternalProcessorStub(channel).Process()
            await call.write(headers_message("/v1/chat/completions", {}, FULL_DUPLEX))
            await call.write(body_message(orjson.dumps(CHAT), True))
            assert destination(await call.read()) == (IDLE, IDLE)
            await call.read()
            queue = server.pool.slots.queues[0]
            assert queue.num_running == 1  # the next decision sees it before any scrape does
            await call.done_writing()
            assert await call.read() is grpc.aio.EOF
        for _ in range(50):
            if queue.num_running == 0:
                break
            await asyncio.sleep(0.02)
        assert queue.num_running == 0

    run({}, scenario)


def test_a_request_without_a_body_is_decided_at_the_headers_and_health_is_served() -> None:
    async def scenario(server: Any, target: str) -> Any:
        answers = await exchange(target, FULL_DUPLEX, None, path="/v1/models")
        assert answers[0].WhichOneof("response") == "request_headers"
        assert destination(answers[0])[0] in (IDLE, BUSY, OTHER)
        async with grpc.aio.insecure_channel(target) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for service in ("liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor"):
                reply = await stub.Check(health_pb2.HealthCheckRequest(service=service))
                assert reply.status == health_pb2.HealthCheckResponse.SERVING

    run({}, scenario)


def test_an_embeddings_request_is_routed_by_its_model_as_the_gateway_forwards_it() -> None:
    async def scenario(server: Any, target: str) -> Any:
        body = {"model": "qwen", "input": ["a passage " * 20]}
        answers = await exchange(target, FULL_DUPLEX, body, path="/v1/embeddings")
        assert destination(answers[0]) == (OTHER, OTHER)  # the one endpoint serving qwen
        refused = await exchange(target, FULL_DUPLEX, {"model": 7, "input": "x"}, path="/v1/embeddings")
        status, document = _refusal(refused)
        assert status == 400 and document["error"]["param"] == "model"

    run({}, scenario)
