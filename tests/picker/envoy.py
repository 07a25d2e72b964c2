"""A client that speaks ext_proc as Envoy does, and picker fixtures (canned endpoint metrics, a served picker).

``exchange`` drives one HTTP request's stream in a request body mode the way Envoy's ext_proc filter does:
``protocol_config`` on the first message; BUFFERED: the headers, wait for their answer, then the whole body in
one message; STREAMED: the headers, wait, then each chunk waiting for its answer; FULL_DUPLEX_STREAMED: the
headers and every chunk without waiting, then the answers. An ``ImmediateResponse`` ends the exchange.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import grpc
import orjson
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc
from google.protobuf import struct_pb2

from slosched.picker.config import parse_picker_config
from slosched.picker.messages import BUFFERED, FULL_DUPLEX, STREAMED
from slosched.picker.server import PickerServer

KEY = "x-gateway-destination-endpoint"


def prometheus(running: float = 0, waiting: float = 0, kv: float = 0.0) -> str:
    return (
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{model_name="m"}} {running}\n'
        "# TYPE vllm:num_requests_waiting gauge\n"
        f'vllm:num_requests_waiting{{model_name="m"}} {waiting}\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f'vllm:kv_cache_usage_perc{{model_name="m"}} {kv}\n'
    )


class CannedMetrics:
    """``fetch`` for the picker: each endpoint's exposition by address; a missing one fails like a dead server."""

    def __init__(self, texts: Mapping[str, str]) -> None:
        self.texts = dict(texts)
        self.urls: list[str] = []

    async def __call__(self, url: str) -> str:
        self.urls.append(url)
        address = url.removeprefix("http://").partition("/")[0]
        if address not in self.texts:
            raise ConnectionError(f"{address} is down")
        return self.texts[address]


@contextlib.asynccontextmanager
async def served(
    config: Mapping[str, Any], metrics: Mapping[str, str], clock: Callable[[], float] | None = None
) -> AsyncIterator[tuple[PickerServer, str]]:
    """A picker on a free localhost port, scraped once before the first request; yields it and its target."""
    picker_config = parse_picker_config({"scrape_interval_s": 3600, "metrics_port": None, **config})
    server = PickerServer(picker_config, fetch=CannedMetrics(metrics), clock=clock)
    port = await server.start("127.0.0.1", 0)
    await server.scrape()
    try:
        yield server, f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


def headers_message(
    path: str, headers: Mapping[str, str], mode: int, end_of_stream: bool = False, subset: Sequence[str] | None = None
) -> pb.ProcessingRequest:
    values = [(":method", "POST" if not end_of_stream else "GET"), (":path", path), *headers.items()]
    header_map = base_pb2.HeaderMap(
        headers=[base_pb2.HeaderValue(key=key, raw_value=value.encode()) for key, value in values]
    )
    message = pb.ProcessingRequest(
        request_headers=pb.HttpHeaders(headers=header_map, end_of_stream=end_of_stream),
        protocol_config=pb.ProtocolConfiguration(request_body_mode=mode, response_body_mode=mode),  # type: ignore[arg-type]
    )
    if subset is not None:
        hint = struct_pb2.Struct()
        hint.update({KEY + "-subset": list(subset)})
        message.metadata_context.filter_metadata["envoy.lb.subset_hint"].CopyFrom(hint)
    return message


def body_message(chunk: bytes, end_of_stream: bool) -> pb.ProcessingRequest:
    return pb.ProcessingRequest(request_body=pb.HttpBody(body=chunk, end_of_stream=end_of_stream))


def response_headers_message(status: int, content_type: str | None) -> pb.ProcessingRequest:
    values = [(":status", str(status))] + ([] if content_type is None else [("content-type", content_type)])
    header_map = base_pb2.HeaderMap(headers=[base_pb2.HeaderValue(key=k, raw_value=v.encode()) for k, v in values])
    return pb.ProcessingRequest(response_headers=pb.HttpHeaders(headers=header_map))


def response_body_message(chunk: bytes, end_of_stream: bool) -> pb.ProcessingRequest:
    return pb.ProcessingRequest(response_body=pb.HttpBody(body=chunk, end_of_stream=end_of_stream))


def chunked(body: bytes, parts: int) -> list[bytes]:
    size = max(len(body) // parts, 1)
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return [*pieces[: parts - 1], b"".join(pieces[parts - 1 :])]


async def _read(call: Any) -> pb.ProcessingResponse:
    answer = await asyncio.wait_for(call.read(), 5)
    assert answer is not grpc.aio.EOF, "the picker closed the stream without answering"
    return answer  # type: ignore[no-any-return]


async def exchange(
    target: str,
    mode: int,
    body: Mapping[str, Any] | bytes | None,
    headers: Mapping[str, str] | None = None,
    path: str = "/v1/chat/completions",
    chunks: int = 1,
    subset: Sequence[str] | None = None,
) -> list[pb.ProcessingResponse]:
    """The picker's answers to one request's phases, in order; the stream is then closed as Envoy closes it."""
    raw = body if isinstance(body, bytes) or body is None else orjson.dumps(body)
    async with grpc.aio.insecure_channel(target) as channel:
        call = pb_grpc.ExternalProcessorStub(channel).Process()
        answers: list[pb.ProcessingResponse] = []
        await call.write(headers_message(path, headers or {}, mode, raw is None, subset))
        pieces = [] if raw is None else [raw] if mode == BUFFERED else chunked(raw, chunks)
        if mode != FULL_DUPLEX or raw is None:
            answers.append(await _read(call))
            for index, piece in enumerate(pieces):
                if answers[-1].HasField("immediate_response"):
                    break
                await call.write(body_message(piece, index == len(pieces) - 1))
                answers.append(await _read(call))
        else:
            for index, piece in enumerate(pieces):
                await call.write(body_message(piece, index == len(pieces) - 1))
            answers.append(await _read(call))
            if not answers[-1].HasField("immediate_response"):
                answers.append(await _read(call))
        await call.done_writing()
        assert await asyncio.wait_for(call.read(), 5) is grpc.aio.EOF
        return answers


def destination(answer: pb.ProcessingResponse) -> tuple[str | None, str | None]:
    """(header value, dynamic-metadata value) of the destination in one answer."""
    phase = answer.WhichOneof("response")
    common = getattr(answer, phase).response if phase in ("request_headers", "request_body") else None
    header = None
    if common is not None:
        for option in common.header_mutation.set_headers:
            if option.header.key == KEY:
                header = option.header.raw_value.decode()
    metadata = None
    if "envoy.lb" in answer.dynamic_metadata.fields:
        metadata = answer.dynamic_metadata.fields["envoy.lb"].struct_value.fields[KEY].string_value
    return header, metadata


__all__ = [
    "BUFFERED",
    "FULL_DUPLEX",
    "STREAMED",
    "CannedMetrics",
    "destination",
    "exchange",
    "prometheus",
    "response_body_message",
    "response_headers_message",
    "served",
]
