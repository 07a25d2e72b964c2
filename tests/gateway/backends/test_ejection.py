"""Outlier ejection: the circuit breaker's state machine, and a gateway ejecting backends whose calls fail
(5xx, hangs, invalid bodies, resets) although their health checks pass, then probing them back."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from slosched.devtools.faulty import INVALID_BODY
from slosched.gateway.backends.ejection import Outlier
from slosched.gateway.ops.config import EjectionConfig
from tests.gateway.faulty_backend import faulty_harness

CALL = {"prompt": "p", "max_tokens": 2}


def outlier(k: int = 3, base_s: float = 10.0, max_s: float = 35.0) -> Outlier:
    return Outlier(EjectionConfig(consecutive_failures=k, base_s=base_s, max_s=max_s), "b0")


def test_k_consecutive_failures_eject_and_a_success_resets_the_count() -> None:
    state = outlier()
    state.failed(0.0, False, "HTTP 500")
    state.failed(0.0, False, "HTTP 500")
    state.succeeded(False)  # a success in between: the count starts over
    state.failed(1.0, False, "HTTP 500")
    state.failed(1.0, False, "HTTP 500")
    assert not state.ejected and state.available(1.0)
    state.failed(1.0, False, "HTTP 500")
    assert state.ejected and not state.available(1.0) and state.ejected_until_s == 11.0


def test_half_open_takes_one_probe_whose_success_closes_the_circuit() -> None:
    state = outlier()
    for _ in range(3):
        state.failed(0.0, False, "timeout")
    assert not state.available(9.9) and state.available(10.0)  # half-open after base_s
    assert state.begin() is True  # the probe
    assert not state.available(10.0)  # one probe at a time
    state.succeeded(False)  # a late success of a call sent before the ejection changes nothing
    state.failed(10.0, False, "late failure")
    assert state.ejected and state.probing
    state.succeeded(True)
    assert not state.ejected and state.available(10.0) and state.begin() is False


def test_failed_probes_double_the_ejection_up_to_the_cap_and_a_cancelled_probe_frees_the_slot() -> None:
    state = outlier()
    for _ in range(3):
        state.failed(0.0, False, "HTTP 500")
    durations = []
    now = 0.0
    for _ in range(4):
        now = state.ejected_until_s
        assert state.begin()
        state.failed(now, True, "HTTP 500")
        durations.append(state.ejected_until_s - now)
    assert durations == [20.0, 35.0, 35.0, 35.0]  # 10, 20, 40 -> capped at 35
    now = state.ejected_until_s
    assert state.begin() and not state.available(now)
    state.released(True)  # the probe's client left: no verdict, another probe may go
    assert state.available(now) and state.ejected
    assert outlier().begin() is False  # a closed circuit has no probe


def test_a_streak_ends_after_max_s_without_ejection() -> None:
    state = outlier(k=1)
    state.failed(0.0, False, "x")
    assert state.begin()
    state.succeeded(True)
    state.failed(5.0, False, "x")  # ejected again within max_s: doubled
    assert state.ejected_until_s == 25.0
    assert state.begin()
    state.succeeded(True)
    state.failed(100.0, False, "x")  # long after: base again
    assert state.ejected_until_s == 110.0


@pytest.mark.parametrize("mode", ["error500", "invalid", "reset"])
def test_a_failing_backend_with_ok_health_is_ejected_and_probed_back(mode: str) -> None:
    async def scenario() -> None:
        async with faulty_harness([mode, "none"], policies={"router": "round-robin"}) as h:
            async with httpx.AsyncClient(base_url=h.url, timeout=10) as client:
                bad = h.gateway.dispatcher.backends[0]
                results = []
                async with asyncio.timeout(5):  # a reset also marks it down until its health check passes
                    while not bad.outlier.ejected:
                        results.append(await client.post("/v1/completions", json=CALL))
                        await asyncio.sleep(0.02)
                assert bad.healthy or mode == "reset"  # ejected although /health says OK
                assert h.backends[0].calls == 3  # K consecutive failures
                metrics = (await client.get("/metrics")).text
                assert 'slosched:backend_ejected{backend="b0"} 1.0' in metrics
                assert 'slosched:backend_ejected{backend="b1"} 0.0' in metrics
                assert 'slosched:backend_ejections_total{backend="b0"} 1.0' in metrics
                results += [await client.post("/v1/completions", json=CALL) for _ in range(10)]
                assert h.backends[0].calls == 3  # ejected: no call until the ejection ends
                assert {r.status_code for r in results} == {200}  # every failure was retried on f1
                assert all(r.json()["id"] == "f1" for r in results)  # an invalid body is never delivered
                h.backends[0].fault.set("none")
                await asyncio.sleep(0.6)  # base_s 0.5: half-open
                for _ in range(6):
                    assert (await client.post("/v1/completions", json=CALL)).status_code == 200
                assert not bad.outlier.ejected and h.backends[0].calls >= 2  # probe succeeded, rejoined
                metrics = (await client.get("/metrics")).text
                assert 'slosched:backend_ejected{backend="b0"} 0.0' in metrics
                assert 'slosched:backend_ejections_total{backend="b0"} 1.0' in metrics  # a counter: it stays
            await h.settle()

    asyncio.run(scenario())


def test_an_invalid_body_everywhere_is_a_502_bad_backend_response() -> None:
    async def scenario() -> None:
        async with faulty_harness(["invalid", "invalid"]) as h, httpx.AsyncClient(base_url=h.url) as client:
            response = await client.post("/v1/completions", json=CALL)
            assert response.status_code == 502
            assert response.json()["error"]["type"] == "bad_backend_response"
            assert INVALID_BODY.decode() not in response.text
            await h.settle()
            assert h.outcomes() == {"failed/bad_backend_response": 1.0}

    asyncio.run(scenario())


def test_when_every_backend_of_a_model_is_ejected_one_probe_still_goes() -> None:
    async def scenario() -> None:
        ejection = {"consecutive_failures": 1, "base_s": 30.0, "max_s": 60.0}
        async with faulty_harness(["error500"], max_attempts=1, ejection=ejection) as h:
            async with httpx.AsyncClient(base_url=h.url, timeout=10) as client:
                assert (await client.post("/v1/completions", json=CALL)).status_code == 502
                assert h.gateway.dispatcher.backends[0].outlier.ejected
                h.backends[0].fault.set("none")
                # Ejected for 30 s, the only backend of its model: the next call is its probe, not a 503.
                assert (await client.post("/v1/completions", json=CALL)).status_code == 200
                assert not h.gateway.dispatcher.backends[0].outlier.ejected
            await h.settle()

    asyncio.run(scenario())


def test_calls_go_only_to_their_models_backends_and_retry_among_them() -> None:
    async def scenario() -> None:
        async with faulty_harness(["error500", "error500", "none"], models=["big", "big", "tiny"]) as h:
            async with httpx.AsyncClient(base_url=h.url, timeout=10) as client:
                failed = await client.post("/v1/completions", json={**CALL, "model": "big"})
                assert failed.status_code == 502 and failed.json()["error"]["type"] == "backend_failed"
                assert h.backends[0].calls + h.backends[1].calls == 3  # three attempts, never on "tiny"
                assert (await client.post("/v1/completions", json={**CALL, "model": "tiny"})).status_code == 200
                missing = await client.post("/v1/completions", json={**CALL, "model": "nope"})
                assert missing.status_code == 404 and "big, tiny" in missing.json()["error"]["message"]
            assert h.backends[2].calls == 1
            await h.settle()

    asyncio.run(scenario())
