"""Issue 25: a streamed call whose backend answers with an invalid body is never delivered as a success."""

from __future__ import annotations

import asyncio

import httpx

from slosched.devtools.faulty import INVALID_BODY
from tests.gateway.faulty_backend import faulty_harness

STREAM = {"prompt": "hello", "max_tokens": 4, "stream": True}


def test_a_streamed_invalid_body_is_a_502_not_a_truncated_success() -> None:
    async def scenario() -> None:
        async with faulty_harness(["invalid", "invalid"]) as h, httpx.AsyncClient(base_url=h.url) as client:
            response = await client.post("/v1/completions", json=STREAM)
            assert response.status_code == 502, response.text
            assert response.json()["error"]["type"] == "bad_backend_response"
            assert INVALID_BODY.decode() not in response.text
            await h.settle()
            assert h.outcomes() == {"failed/bad_backend_response": 1.0}

    asyncio.run(scenario())


def test_a_streamed_invalid_body_on_one_backend_is_retried_on_the_other() -> None:
    async def scenario() -> None:
        async with faulty_harness(["invalid", "none"]) as h, httpx.AsyncClient(base_url=h.url) as client:
            for _ in range(4):
                response = await client.post("/v1/completions", json=STREAM)
                assert response.status_code == 200 and response.text.rstrip().endswith("data: [DONE]")
            await h.settle()
            assert h.outcomes() == {"completed/ok": 4.0}

    asyncio.run(scenario())
