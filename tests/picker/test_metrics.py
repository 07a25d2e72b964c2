"""The picker's /metrics: the gateway's names where the quantity is the same, read over HTTP."""

from __future__ import annotations

import asyncio
import socket

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from slosched.core.errors import ConfigError
from slosched.picker.config import parse_picker_config
from slosched.picker.extproc import RequestStream
from slosched.picker.metrics import PickerMetrics
from slosched.picker.pool import EndpointPool
from tests.picker.envoy import (
    FULL_DUPLEX,
    body_message,
    exchange,
    headers_message,
    prometheus,
    response_body_message,
    response_headers_message,
    served,
)
from tests.picker.test_usage import _json_body

IDLE = "10.0.0.1:8000"
ENDPOINTS = [{"address": IDLE, "model": "llama", "gpu": "H100"}]
CHAT = {"model": "llama", "messages": [{"role": "user", "content": "hi " * 30}], "max_tokens": 32}


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_picks_refusals_decisions_and_queues_are_exported() -> None:
    async def main() -> str:
        async with served({"endpoints": ENDPOINTS, "metrics_port": 0}, {IDLE: prometheus()}) as (server, target):
            await exchange(target, FULL_DUPLEX, CHAT)
            await exchange(target, FULL_DUPLEX, {**CHAT, "model": "nope"})
            assert server.metrics_port is not None
            async with httpx.AsyncClient() as client:
                reply = await client.get(f"http://127.0.0.1:{server.metrics_port}/metrics")
            return reply.text

    samples = _samples(asyncio.run(main()))
    backend = (("backend", IDLE),)
    assert samples[("slosched:routed_total", backend)] == 1.0
    assert samples[("slosched:admission_rejections_total", (("reason", "model_not_found"),))] == 1.0
    assert samples[("slosched:picker_decision_seconds_count", ())] == 1.0
    assert samples[("slosched:num_requests_running", backend)] == 0.0  # the stream closed: its place is free
    assert samples[("slosched:backend_up", backend)] == 1.0
    assert samples[("slosched:picker_responses_learned_total", ())] == 0.0  # Envoy sent no response phases here


def test_a_response_learned_is_counted_with_its_tokens() -> None:
    async def main() -> tuple[float, float]:
        pool = EndpointPool(parse_picker_config({"endpoints": ENDPOINTS}))
        metrics = PickerMetrics(pool)
        stream = RequestStream(pool, metrics)
        stream.handle(headers_message("/v1/chat/completions", {}, FULL_DUPLEX))
        stream.handle(body_message(orjson.dumps(CHAT), True))
        stream.handle(response_headers_message(200, "application/json"))
        stream.handle(response_body_message(_json_body(12), True))
        samples = _samples(metrics.registry_text())
        return samples[("slosched:picker_responses_learned_total", ())], samples[
            ("slosched:picker_learned_output_tokens_total", ())
        ]

    assert asyncio.run(main()) == (1.0, 12.0)


def test_a_metrics_port_in_use_is_an_error_naming_the_field() -> None:
    pool = EndpointPool(parse_picker_config({"endpoints": ENDPOINTS}))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(ConfigError, match="metrics_port"):
            PickerMetrics(pool).serve("127.0.0.1", taken.getsockname()[1])


def test_the_config_serves_metrics_on_9090_unless_told_not_to() -> None:
    assert parse_picker_config({}).metrics_port == 9090
    assert parse_picker_config({"metrics_port": None}).metrics_port is None
    with pytest.raises(ConfigError, match="metrics_port"):
        parse_picker_config({"metrics_port": 70000})
