"""The Responses API through the picker: the endpoint that stored a response is read from the response as
Envoy shows it, and every follow-up (``previous_response_id``, a read, a cancel) is sent there."""

from __future__ import annotations

import asyncio

import grpc
import orjson
import pytest
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc

from slosched.gateway.calls.call import HttpError
from tests.picker.envoy import (
    FULL_DUPLEX,
    body_message,
    destination,
    exchange,
    headers_message,
    prometheus,
    response_body_message,
    response_headers_message,
    served,
)

BUSY, IDLE = "10.0.0.1:8000", "10.0.0.2:8000"
ENDPOINTS = [{"address": address, "model": "llama", "gpu": "H100"} for address in (BUSY, IDLE)]
STORED = b'{"id":"resp_42","object":"response","output":[{"id":"msg_1"}],"usage":{"output_tokens":3}}'


def test_follow_ups_reads_and_cancels_go_to_the_endpoint_that_stored_the_response() -> None:
    async def main() -> None:
        scraped = {BUSY: prometheus(running=40, waiting=30, kv=0.9), IDLE: prometheus()}
        async with served({"endpoints": ENDPOINTS, "policies": {"router": "least-loaded"}}, scraped) as (
            server,
            target,
        ):
            async with grpc.aio.insecure_channel(target) as channel:  # the first response is made on BUSY
                call = pb_grpc.ExternalProcessorStub(channel).Process()
                await call.write(headers_message("/v1/responses", {}, FULL_DUPLEX))
                await call.write(body_message(orjson.dumps({"input": "hi"}), True))
                assert destination(await call.read())[0] == IDLE  # the router's choice: the idle endpoint
                await call.read()
                await call.write(response_headers_message(200, "application/json"))
                await call.read()
                await call.write(response_body_message(STORED, True))
                await call.read()
                await call.done_writing()
                assert await call.read() is grpc.aio.EOF
            pool = server.pool
            owner = pool.owners.owner("resp_42", "default")
            assert owner is not None and owner.backend == IDLE
            pool.owners.record("resp_42", BUSY, "default")  # as if BUSY had made it: the router would not go there
            follow_up = {"input": "more", "previous_response_id": "resp_42"}
            answers = await exchange(target, FULL_DUPLEX, follow_up, path="/v1/responses")
            assert destination(answers[0])[0] == BUSY
            for path in ("/v1/responses/resp_42", "/v1/responses/resp_42/cancel"):
                assert destination((await exchange(target, FULL_DUPLEX, None, path=path))[0])[0] == BUSY
            refused = (await exchange(target, FULL_DUPLEX, None, path="/v1/responses/resp_other"))[0]
            assert refused.immediate_response.status.code == 404
            with pytest.raises(HttpError, match="previous_response_id"):
                pool.parse("/v1/responses", {"x-tenant": "b"}, orjson.dumps(follow_up))  # another tenant's

    asyncio.run(main())
