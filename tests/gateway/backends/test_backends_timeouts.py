"""First-byte timeouts derived from the backend's predicted latency: a backend that hangs while its health
check passes is abandoned after a few predicted latencies and the call retried elsewhere, well under the
configured worst case (``timeouts.first_byte_s``)."""

from __future__ import annotations

import asyncio
import time

import httpx

from slosched.core.views import StepObservation
from slosched.gateway.calls.call import COMPLETIONS, Call, parse_call, parse_slo_headers
from slosched.gateway.dispatch.attempts import first_byte_timeout_s, is_json
from slosched.gateway.ops.config import TimeoutConfig
from slosched.perf.linear import LinearStepPredictor
from tests.gateway.faulty_backend import faulty_harness

TIMEOUTS = TimeoutConfig(first_byte_s=60.0, first_byte_min_s=1.0, first_byte_factor=4.0)


def _call(body: dict[str, object]) -> Call:
    return parse_call(COMPLETIONS, {"prompt": "x" * 400, **body}, parse_slo_headers({}), 0.0, 256)


def test_the_timeout_follows_the_prediction_within_floor_and_cap() -> None:
    predictor = LinearStepPredictor()
    stream = _call({"max_tokens": 100, "stream": True})
    whole = _call({"max_tokens": 100})
    assert first_byte_timeout_s(stream, 0, predictor, TIMEOUTS, False) == 1.0  # one prefill step: the floor
    assert 1.0 < first_byte_timeout_s(whole, 0, predictor, TIMEOUTS, False) < 60.0  # + 100 decode steps
    slower = first_byte_timeout_s(whole, 32, predictor, TIMEOUTS, False)
    assert slower > first_byte_timeout_s(whole, 0, predictor, TIMEOUTS, False)  # a busier backend is slower
    assert first_byte_timeout_s(_call({"max_tokens": 100_000}), 0, predictor, TIMEOUTS, False) == 60.0  # cap
    assert first_byte_timeout_s(_call({}), 0, predictor, TIMEOUTS, False) == 60.0  # no limit: up to max len
    assert first_byte_timeout_s(stream, 0, predictor, TIMEOUTS, True) == 60.0  # last attempt: the cap
    for _ in range(300):  # a backend observed to be 10x slower than the prior gets a longer timeout
        predictor.observe(StepObservation(0, 0, 1, 200, (0.2,)))
    assert first_byte_timeout_s(whole, 0, predictor, TIMEOUTS, False) == 60.0


def test_only_json_bodies_are_valid() -> None:
    assert is_json(b'{"choices": []}') and is_json(b'{"x": NaN}')
    assert not is_json(b"<html>") and not is_json(b"") and not is_json(b'{"choi')


def test_a_hung_backend_is_abandoned_quickly_and_its_calls_retried_elsewhere() -> None:
    async def scenario() -> None:
        async with faulty_harness(["hang", "none"], policies={"router": "round-robin"}) as h:
            async with httpx.AsyncClient(base_url=h.url, timeout=60) as client:
                started = time.monotonic()
                calls = [{"prompt": "p", "max_tokens": 2, "stream": index % 2 == 1} for index in range(12)]
                results = await asyncio.gather(*(client.post("/v1/completions", json=body) for body in calls))
                elapsed = time.monotonic() - started
            assert [r.status_code for r in results] == [200] * 12
            assert elapsed < 5.0  # first_byte_min_s 0.3 per hung attempt, far below first_byte_s (30 s)
            assert h.backends[0].calls >= 1 and h.gateway.dispatcher.backends[0].healthy
            assert h.value("slosched:retries_total") == h.backends[0].calls
            await h.settle()
            assert h.outcomes() == {"completed/ok": 12.0}

    asyncio.run(scenario())
