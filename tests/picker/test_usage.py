"""The picker learns from the responses Envoy shows it: token counts read as they pass, taught to the beliefs."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import orjson
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc

from slosched.gateway.backends.forwarding import stream_format
from slosched.picker.config import parse_picker_config
from slosched.picker.pool import EndpointPool
from slosched.picker.usage import ResponseReader
from tests.picker.envoy import (
    FULL_DUPLEX,
    body_message,
    destination,
    headers_message,
    prometheus,
    response_body_message,
    response_headers_message,
    served,
)

IDLE = "10.0.0.1:8000"
ENDPOINTS = [{"address": IDLE, "model": "llama", "gpu": "H100"}]
CHAT = {"model": "llama", "messages": [{"role": "user", "content": "hello " * 50}], "max_tokens": 400}


class Progress:
    num_output_tokens = 0
    first_token_s: float | None = None
    sequences = 1


def _json_body(tokens: int) -> bytes:
    choices = [{"index": 0, "message": {"role": "assistant", "content": "x " * tokens}}]
    return orjson.dumps({"id": "c", "choices": choices, "usage": {"prompt_tokens": 9, "completion_tokens": tokens}})


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


def _reader(limit: int = 1 << 20) -> tuple[ResponseReader, Progress]:
    progress = Progress()
    return ResponseReader(progress, lambda: 7.0, limit), progress


def test_a_json_body_gives_its_usage_and_an_error_or_a_cut_body_gives_nothing() -> None:
    body = _json_body(37)
    reader, _ = _reader()
    reader.headers({":status": "200", "content-type": "application/json"})
    for start in range(0, len(body), 50):
        reader.body(body[start : start + 50])
    assert (reader.output_tokens(), reader.streamed) == (37, False)
    failed, _ = _reader()
    failed.headers({":status": "500", "content-type": "application/json"})
    failed.body(body)
    assert failed.output_tokens() == 0
    cut, _ = _reader(limit=len(body) - 30)  # the usage lies past the bound
    cut.body(body)
    assert cut.output_tokens() == 0


def test_a_stream_is_counted_event_by_event_then_by_its_usage_when_it_has_one() -> None:
    events = [_event({"choices": [{"delta": {"content": "a"}}]}) for _ in range(5)]
    stream = b"".join(events) + b"data: [DONE]\n\n"
    reader, progress = _reader()
    reader.headers({":status": "200", "content-type": "text/event-stream; charset=utf-8"})
    reader.body(stream[:40])  # an event split across chunks is counted once, when whole
    assert progress.num_output_tokens == 0
    reader.body(stream[40:])
    assert (progress.num_output_tokens, progress.first_token_s) == (5, 7.0)  # live, as the gateway's queue sees it
    assert (reader.output_tokens(), reader.streamed) == (5, True)
    with_usage, _ = _reader()  # no response headers: the body says it is a stream
    usage = _event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 6}})
    with_usage.body(b"".join(events) + usage[:-2])  # the last event without its blank line
    assert (with_usage.output_tokens(), with_usage.streamed) == (6, True)


def test_a_stream_of_n_choices_moves_the_call_by_one_sequence_s_share_and_reads_the_sum() -> None:
    """The router sees one sequence's progress (as the gateway's queue does); the reader returns every
    choice's tokens, which ``EndpointPool.learn`` divides by the call's sequences."""
    reader, progress = _reader()
    progress.sequences = 3
    reader.body(b"".join(_event({"choices": [{"index": i % 3, "delta": {"content": "a"}}]}) for i in range(9)))
    assert (progress.num_output_tokens, reader.output_tokens()) == (3, 9)


def test_the_picker_learns_each_template_s_output_from_the_responses() -> None:
    async def main() -> tuple[float, float, list[bytes], int]:
        async with served({"endpoints": ENDPOINTS}, {IDLE: prometheus()}) as (server, target):
            pool = server.pool
            before = pool.parse("/v1/chat/completions", {}, orjson.dumps(CHAT)).request.predicted_output_tokens
            echoed: list[bytes] = []
            async with grpc.aio.insecure_channel(target) as channel:
                stub = pb_grpc.ExternalProcessorStub(channel)
                for tokens in (30, 50):
                    call = stub.Process()
                    await call.write(headers_message("/v1/chat/completions", {}, FULL_DUPLEX))
                    await call.write(body_message(orjson.dumps(CHAT), True))
                    assert destination(await call.read()) == (IDLE, IDLE)
                    await call.read()  # the request body sent back
                    await call.write(response_headers_message(200, "application/json"))
                    await call.read()
                    body = _json_body(tokens)
                    for last, piece in ((False, body[:60]), (True, body[60:])):
                        await call.write(response_body_message(piece, last))
                        echoed.append((await call.read()).response_body.response.body_mutation.streamed_response.body)
                    assert b"".join(echoed[-2:]) == body  # passed on unchanged
                    await call.done_writing()
                    assert await call.read() is grpc.aio.EOF
            after = pool.parse("/v1/chat/completions", {}, orjson.dumps(CHAT)).request.predicted_output_tokens
            assert pool.slots is not None
            return before, after, echoed, pool.slots.queues[0].num_running

    before, after, _, running = asyncio.run(main())
    assert before != 40.0 and after == 40.0  # the mean of the two responses' usage
    assert running == 0  # each call's place was released at the end of its response


def test_a_response_without_a_pick_or_with_a_refused_status_teaches_nothing() -> None:
    async def main() -> float:
        async with served({"endpoints": ENDPOINTS}, {IDLE: prometheus()}) as (server, target):
            async with grpc.aio.insecure_channel(target) as channel:
                call = pb_grpc.ExternalProcessorStub(channel).Process()
                await call.write(headers_message("/v1/chat/completions", {}, FULL_DUPLEX))
                await call.write(body_message(orjson.dumps(CHAT), True))
                await call.read()
                await call.read()
                await call.write(response_headers_message(429, "application/json"))
                await call.read()
                await call.write(response_body_message(_json_body(3), True))
                await call.read()
                await call.done_writing()
                assert await call.read() is grpc.aio.EOF
            return server.pool.parse("/v1/chat/completions", {}, orjson.dumps(CHAT)).request.predicted_output_tokens

    assert asyncio.run(main()) != 3.0


def test_a_call_of_n_sequences_teaches_one_sequence_s_output() -> None:
    """As the gateway (``Call.sequences``): vLLM's usage sums the n choices; the belief models one."""

    async def main() -> None:  # the pool's queues live on an event loop
        pool = EndpointPool(parse_picker_config({"endpoints": ENDPOINTS, "scrape_interval_s": 3600}))
        parsed = pool.parse("/v1/chat/completions", {}, orjson.dumps({**CHAT, "n": 4}))
        pick = pool.pick(parsed)
        assert parsed.sequences == pick.seq.sequences == 4
        assert pool.learn(pick, 200, False)
        after = pool.parse("/v1/chat/completions", {}, orjson.dumps(CHAT)).request
        assert pool.slots is not None and pool.slots.context.output_predictor.predict(after) == 50.0

    asyncio.run(main())


def test_an_anthropic_message_is_parsed_as_a_chat_and_its_stream_counted_in_its_format() -> None:
    """``/v1/messages`` as the gateway reads it (``calls/messages.py``): routed with its deadline, its stream
    (which starts with ``event:``, not ``data:``) counted by text deltas and closed by the final usage."""

    async def main() -> None:
        pool = EndpointPool(parse_picker_config({"endpoints": ENDPOINTS, "scrape_interval_s": 3600}))
        body = {"model": "llama", "max_tokens": 9, "messages": [{"role": "user", "content": "hi " * 40}]}
        parsed = pool.parse("/v1/messages", {"x-slo-deadline-ms": "3000"}, orjson.dumps(body))
        assert parsed.request.max_output_tokens == 9 and parsed.request.deadline_s < 10.0

    asyncio.run(main())
    progress = Progress()
    reader = ResponseReader(progress, lambda: 7.0, 1 << 20, stream_format("/v1/messages"))
    start = b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"output_tokens":1}}}\n\n'
    delta = b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"text":"a"}}\n\n'
    final = b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":4}}\n\n'
    reader.body(start + delta * 3)
    assert progress.num_output_tokens == 3 and reader.streamed
    reader.body(final + b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    assert reader.output_tokens() == 4
