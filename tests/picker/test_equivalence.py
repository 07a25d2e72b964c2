"""The picker decides as the gateway would: same endpoint state, same requests -> the same endpoints.

The gateway side is the real ``Dispatcher`` (``accept`` gives the output-length belief, ``choose`` routes, the
chosen queue takes the call, as ``Dispatcher._attempt`` does); the picker side is the ext_proc server, each
request's stream kept open (Envoy holds it while the call runs) so both sides count the same calls in flight.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import orjson
import pytest
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc

from slosched.gateway.backends.backend import parse_vllm_metrics
from slosched.gateway.calls.call import CHAT, COMPLETIONS, parse_call, parse_slo_headers
from slosched.gateway.calls.dialects.registry import with_dialects
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.ops.config import parse_config
from slosched.picker.config import backend_config, parse_picker_config
from tests.picker.envoy import FULL_DUPLEX, body_message, destination, headers_message, prometheus, served

NOW = 100.0
ENDPOINTS = [
    {"address": "10.1.0.1:8000", "model": "llama", "gpu": "H100", "max_concurrency": 8},
    {"address": "10.1.0.2:8000", "model": "llama", "gpu": "A100", "max_concurrency": 8},
    {"address": "10.1.0.3:8000", "model": "llama", "gpu": "H100", "max_concurrency": 8},
    {"address": "10.1.0.4:8000", "model": "qwen", "gpu": "L4", "max_concurrency": 4},
]
METRICS = {
    "10.1.0.1:8000": prometheus(running=3, waiting=0, kv=0.3),
    "10.1.0.2:8000": prometheus(running=1, waiting=2, kv=0.6),
    "10.1.0.3:8000": prometheus(running=0, waiting=0, kv=0.05),
    "10.1.0.4:8000": prometheus(running=2, waiting=1, kv=0.5),
}


def _requests() -> list[tuple[str, dict[str, str], dict[str, Any]]]:
    requests = []
    for i in range(24):
        model = "qwen" if i % 5 == 4 else "llama"
        headers = {"x-slo-deadline-ms": str(500 + 400 * (i % 7))} if i % 3 else {"x-job-id": f"job-{i % 4}"}
        if i % 2:
            body: dict[str, Any] = {"model": model, "prompt": "tok " * (20 + 90 * (i % 6)), "max_tokens": 16 + 8 * i}
            requests.append((COMPLETIONS, headers, body))
        else:
            messages = [{"role": "user", "content": "word " * (40 + 150 * (i % 4))}]
            requests.append((CHAT, headers, {"model": model, "messages": messages, "max_tokens": 32 + 4 * i}))
    return requests


def _gateway_picks(policies: dict[str, Any]) -> list[str]:
    async def main() -> list[str]:
        picker = parse_picker_config({"endpoints": ENDPOINTS})
        backends = [backend_config(endpoint).model_dump() for endpoint in picker.endpoints]
        dispatcher = Dispatcher(parse_config({"backends": backends, "policies": policies}), clock=lambda: NOW)
        for backend, queue in zip(dispatcher.backends, dispatcher.queues, strict=True):
            backend.metrics = parse_vllm_metrics(METRICS[backend.name])
            backend.metrics.scraped_s = NOW
            queue.set_kv_usage(backend.metrics.kv_usage)
        picks = []
        for path, headers, body in _requests():
            body = dict(body)
            slo = with_dialects(parse_slo_headers(headers), headers, body)
            call = parse_call(path, body, slo, NOW, dispatcher.config.default_max_tokens, dispatcher.models)
            dispatcher.accept(call)
            queue = dispatcher.choose(call.request, set(), call.model)
            queue.enqueue(call.request, call.request.prompt_tokens)
            picks.append(dispatcher.backends[queue.index].name)
        return picks

    return asyncio.run(main())


def _picker_picks(policies: dict[str, Any]) -> list[str]:
    async def main() -> list[str]:
        config = {"endpoints": ENDPOINTS, "policies": policies}
        async with (
            served(config, METRICS, clock=lambda: NOW) as (_, target),
            grpc.aio.insecure_channel(target) as channel,
        ):
            stub = pb_grpc.ExternalProcessorStub(channel)
            picks, calls = [], []
            for path, headers, body in _requests():
                call = stub.Process()
                await call.write(headers_message(path, headers, FULL_DUPLEX))
                await call.write(body_message(orjson.dumps(body), True))
                header, metadata = destination(await call.read())
                assert header == metadata
                await call.read()  # the body sent back
                picks.append(header)
                calls.append(call)  # open: the call still runs at its endpoint
            for call in calls:
                await call.done_writing()
            return picks

    return asyncio.run(main())


ROUTERS = ["least-tokens", "least-loaded", "round-robin", "power-of-two", "random", "prism", "deadline-completion"]


@pytest.mark.parametrize("router", ROUTERS)
def test_the_picker_picks_what_the_gateway_s_router_picks(router: str) -> None:
    policies = {"router": router, "seed": 7}
    gateway = _gateway_picks(policies)
    assert _picker_picks(policies) == gateway
    assert len(set(gateway)) > 1  # the state and requests make the router choose, not default


def test_the_slosched_stack_picks_the_same_too() -> None:
    policies = {"stack": "slosched"}
    assert _picker_picks(policies) == _gateway_picks(policies)
