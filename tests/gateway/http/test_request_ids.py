"""``X-Request-Id``: the client's (validated) or a generated one, echoed on every response (errors, streams,
every route), sent to the backend, bound into the signed ``vllm_xargs`` and shown in ``/status.json``."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from slosched.contract import verify_xargs
from slosched.gateway.calls.call import client_request_id
from tests.gateway.helpers import harness

_KEY = "k" * 32
_BODY = {"prompt": "hello", "max_tokens": 2}


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        *[("abc-123", True), ("trace:01.A_b", True), ("x" * 128, True)],
        *[("x" * 129, False), ("", False), ("a b", False), ('a"b', False), ("a,b", False), ("é", False)],
    ],
)
def test_a_client_id_is_kept_only_when_short_and_plain(given: str, kept: bool) -> None:
    assert client_request_id(given) == (given if kept else None)


def test_the_client_id_is_echoed_forwarded_signed_and_shown_in_status() -> None:
    async def scenario() -> None:
        async with harness(num_stubs=1, xargs_key=_KEY) as h, httpx.AsyncClient(base_url=h.url) as client:
            answer = await client.post("/v1/completions", json=_BODY, headers={"X-Request-Id": "trace-42"})
            assert answer.status_code == 200 and answer.headers["x-request-id"] == "trace-42"
            assert h.stubs[0].request_ids == ["trace-42"]
            xargs = h.stubs[0].received[0][1]["vllm_xargs"]
            # vLLM's own id embeds the x-request-id it got: the signature must hold against it.
            assert xargs["slosched_request_id"] == "trace-42"
            assert verify_xargs(xargs, _KEY.encode(), "cmpl-trace-42-0") is None
            status = (await client.get("/status.json")).json()
            assert [row["request"] for row in status["decisions"]] == ["trace-42"]

    asyncio.run(scenario())


def test_a_missing_or_invalid_id_is_generated_and_matches_backend_and_status() -> None:
    async def scenario() -> None:
        async with harness(num_stubs=1) as h, httpx.AsyncClient(base_url=h.url) as client:
            plain = await client.post("/v1/completions", json=_BODY)
            bad = await client.post("/v1/completions", json=_BODY, headers={"X-Request-Id": "no spaces please"})
            ids = [plain.headers["x-request-id"], bad.headers["x-request-id"]]
            assert all(i.startswith("req-") for i in ids) and ids[0] != ids[1]
            assert h.stubs[0].request_ids == ids
            status = (await client.get("/status.json")).json()
            assert {row["request"] for row in status["decisions"]} == set(ids)

    asyncio.run(scenario())


def test_errors_streams_and_other_routes_echo_the_id() -> None:
    async def scenario() -> None:
        async with harness(num_stubs=1) as h, httpx.AsyncClient(base_url=h.url) as client:
            headers = {"X-Request-Id": "e1"}
            bad = await client.post("/v1/completions", json={"prompt": "x", "max_tokens": -1}, headers=headers)
            assert bad.status_code == 400 and bad.headers["x-request-id"] == "e1"
            wrong = await client.get("/v1/completions", headers=headers)
            assert wrong.status_code == 405 and wrong.headers["x-request-id"] == "e1"
            missing = await client.get("/nowhere", headers=headers)
            assert missing.status_code == 404 and missing.headers["x-request-id"] == "e1"
            assert (await client.get("/health", headers=headers)).headers["x-request-id"] == "e1"
            async with client.stream("POST", "/v1/completions", json={**_BODY, "stream": True}, headers=headers) as s:
                assert s.status_code == 200 and s.headers["x-request-id"] == "e1"
                assert b"[DONE]" in b"".join([chunk async for chunk in s.aiter_bytes()])
            generated = await client.get("/health")
            assert generated.headers["x-request-id"].startswith("req-")

    asyncio.run(scenario())
