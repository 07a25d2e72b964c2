"""The ext_proc stream of one HTTP request: when the picker decides, and where its answer goes.

Envoy opens one bidirectional gRPC stream per HTTP request and sends its phases in order (request headers,
body, trailers, then the response's). Where the decision can go depends on the request body mode Envoy
announces in the first message's ``protocol_config`` (absent in older Envoys: read as ``BUFFERED``):

- ``FULL_DUPLEX_STREAMED`` (what GIE's EPP requires): Envoy sends the body chunks without waiting for the
  headers answer, and holds the request until it comes. The picker keeps the headers answer back, gathers
  the chunks up to ``end_of_stream``, decides, then answers the headers (destination header + metadata) and
  sends the body back whole as one streamed chunk (in this mode a chunk not sent back is lost).
- ``BUFFERED`` / ``BUFFERED_PARTIAL``: Envoy waits for the headers answer before it sends the body in one
  message: the headers are let through unchanged, and the decision goes on the body answer (header mutations
  there take effect in buffered mode only).
- ``STREAMED``: Envoy passes the headers upstream before any body chunk arrives, so a body-phase answer can
  no longer move the request: the picker decides at the headers, from the headers alone (the model from
  ``x-gateway-model-name``, as GIE's body-based router sets it; the ``x-slo-*`` and ``x-job-*`` headers), and
  lets each chunk through.

A request without a body (headers with ``end_of_stream``) is decided at the headers in every mode. The call
stays counted at its endpoint until the stream ends (Envoy closes it when the HTTP exchange is over) or the
response body's last chunk passes; response phases, when Envoy sends them, are let through (echoed in full-
duplex mode), and a ``x-gateway-destination-endpoint-served`` report moves the count to the endpoint that
actually served. As they pass, the response's tokens are counted (``usage.py``) and, at its end, taught to the
beliefs as the gateway teaches them (``EndpointPool.learn``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc
from google.protobuf.struct_pb2 import Struct

from slosched.gateway.backends.forwarding import stream_format
from slosched.gateway.calls.call import HttpError
from slosched.gateway.calls.other_routes import GENERATION_PATHS
from slosched.gateway.calls.responses import RESPONSES
from slosched.picker.messages import (
    BUFFERED,
    BUFFERED_PARTIAL,
    FULL_DUPLEX,
    NONE,
    STREAMED,
    body_answer,
    destination,
    destination_metadata,
    header_map,
    headers_answer,
    refusal,
    served_endpoint,
    streamed_body,
    subset_hint,
)
from slosched.picker.metrics import PickerMetrics
from slosched.picker.pool import EndpointPool, Pick
from slosched.picker.usage import ResponseReader

log = logging.getLogger("slosched.picker")

MODEL_HEADER = "x-gateway-model-name"  # set by GIE's body-based router when the body is not at hand


class RequestStream:
    """The state of one ext_proc stream; ``handle`` maps each message to the answers it calls for."""

    __slots__ = (
        "_body",
        "_headers",
        "_id_read",
        "_metrics",
        "_mode",
        "_path",
        "_pool",
        "_response",
        "_response_mode",
        "_size",
        "_subset",
        "done",
        "pick",
    )

    def __init__(self, pool: EndpointPool, metrics: PickerMetrics) -> None:
        self._pool = pool
        self._metrics = metrics
        self._mode: int | None = None  # the request body mode, from the first message
        self._response_mode = NONE
        self._headers: dict[str, str] = {}
        self._path = ""
        self._subset: list[str] | None = None
        self._body: list[bytes] = []
        self._size = 0
        self.pick: Pick | None = None
        self._response: ResponseReader | None = None  # the response's token count, once there is a pick
        self._id_read = False  # the Responses API: the stored response's id was read (its endpoint kept)
        self.done = False  # an ImmediateResponse went out: Envoy ends the exchange

    def handle(self, message: pb.ProcessingRequest) -> list[pb.ProcessingResponse]:
        if self._mode is None:
            config = message.protocol_config if message.HasField("protocol_config") else None
            self._mode = config.request_body_mode if config is not None else NONE
            self._response_mode = config.response_body_mode if config is not None else NONE
        try:
            return self._dispatch(message)
        except HttpError as error:
            self.done = True
            self._metrics.rejections.labels(reason=error.code).inc()
            return [refusal(error)]

    def _dispatch(self, message: pb.ProcessingRequest) -> list[pb.ProcessingResponse]:
        kind = message.WhichOneof("request")
        if kind == "request_headers":
            return self._on_headers(message)
        if kind == "request_body":
            return self._on_body(message.request_body)
        if kind == "request_trailers":
            answers = self._decide_duplex() if self._mode == FULL_DUPLEX and self.pick is None else []
            return [*answers, pb.ProcessingResponse(request_trailers=pb.TrailersResponse())]
        if kind == "response_headers":
            self._note_served(message)
            if self.pick is not None:
                self._reader().headers(header_map(message.response_headers))
            return [pb.ProcessingResponse(response_headers=pb.HeadersResponse())]
        if kind == "response_body":
            return self._on_response_body(message)
        if kind == "response_trailers":
            return [pb.ProcessingResponse(response_trailers=pb.TrailersResponse())]
        return []

    def _on_headers(self, message: pb.ProcessingRequest) -> list[pb.ProcessingResponse]:
        request_headers = message.request_headers
        self._headers = header_map(request_headers)
        self._path = self._headers.get(":path", "").partition("?")[0]
        self._subset = subset_hint(message)
        if request_headers.end_of_stream or self._mode == STREAMED:
            self.pick = self._decide(None)
            return [headers_answer(*self._chosen(None))]
        if self._mode == FULL_DUPLEX:
            return []  # held back until the body is whole: the decision goes on it
        return [headers_answer()]

    def _chosen(self, content_length: int | None) -> tuple[pb.CommonResponse, Struct]:
        """The decision's header mutation and dynamic metadata (one value in both)."""
        assert self.pick is not None
        endpoints, config = self.pick.endpoints, self._pool.config
        return destination(endpoints, config, content_length), destination_metadata(endpoints, config)

    def _on_body(self, body: pb.HttpBody) -> list[pb.ProcessingResponse]:
        if self.pick is not None:  # decided at the headers (STREAMED): the chunks pass unchanged
            return [streamed_body(body.body, body.end_of_stream)] if self._mode == FULL_DUPLEX else [body_answer()]
        self._size += len(body.body)
        if self._size > self._pool.config.max_body_bytes:
            raise HttpError(413, "body_too_large", f"body: at most {self._pool.config.max_body_bytes} bytes")
        self._body.append(body.body)
        last = body.end_of_stream or self._mode in (BUFFERED, BUFFERED_PARTIAL)  # buffered: one message is all
        if not last:
            return [] if self._mode == FULL_DUPLEX else [body_answer()]
        if self._mode == FULL_DUPLEX:
            return self._decide_duplex()
        self.pick = self._decide(b"".join(self._body))
        return [body_answer(*self._chosen(None))]

    def _decide(self, raw: bytes | None) -> Pick:
        """Parse the request (``raw``: its body; None: decided from the headers) and choose its endpoints."""
        started = time.perf_counter()
        parsed = self._pool.parse(self._path, self._headers, raw, self._headers.get(MODEL_HEADER))
        pick = self._pool.pick(parsed, self._subset)
        self._metrics.decision.observe(time.perf_counter() - started)
        self._metrics.routed.labels(backend=pick.endpoints[0]).inc()
        return pick

    def _decide_duplex(self) -> list[pb.ProcessingResponse]:
        """The held headers answer (with the decision), then the body sent back whole."""
        raw = b"".join(self._body)
        self.pick = self._decide(raw)
        return [headers_answer(*self._chosen(len(raw))), streamed_body(raw, True)]

    def _note_served(self, message: pb.ProcessingRequest) -> None:
        if self.pick is None:
            return
        served = served_endpoint(message, self._pool.config.metadata_namespace)
        if served is not None:
            self._pool.served(self.pick, served)

    def _on_response_body(self, message: pb.ProcessingRequest) -> list[pb.ProcessingResponse]:
        body = message.response_body
        if self.pick is not None:
            reader = self._reader()
            reader.body(body.body)
            if self._path == RESPONSES and reader.ok and not self._id_read:  # a stored response: its id leads
                self._id_read = self._pool.remember(self.pick, body.body)
        if body.end_of_stream:
            self._learn()
            self.close()  # the engine is done with it, whatever Envoy still does
        if self._response_mode == FULL_DUPLEX:
            return [streamed_body(body.body, body.end_of_stream, response=True)]
        return [pb.ProcessingResponse(response_body=pb.BodyResponse())]

    def _reader(self) -> ResponseReader:
        assert self.pick is not None
        if self._response is None:
            limit, form = self._pool.config.max_body_bytes, stream_format(self._path)
            self._response = ResponseReader(self.pick.seq, self._pool.clock, limit, form)
        return self._response

    def _learn(self) -> None:
        # Generations only, as the gateway learns: an embedding's latency says nothing of a generation's.
        if self.pick is None or self._response is None or self._path not in GENERATION_PATHS:
            return
        tokens = self._response.output_tokens()
        if self._pool.learn(self.pick, tokens, bool(self._response.streamed)):
            self._metrics.learned.inc()
            self._metrics.learned_tokens.inc(tokens)

    def close(self) -> None:
        """Release the call's place at its endpoint (idempotent)."""
        if self.pick is not None:
            self._pool.release(self.pick)
            self.pick = None


class ExternalProcessor(pb_grpc.ExternalProcessorServicer):
    """``envoy.service.ext_proc.v3.ExternalProcessor`` over an ``EndpointPool`` (grpc.aio: one event loop for
    the streams, the scrapes and the pool, so no decision sees a half-applied scrape)."""

    def __init__(self, pool: EndpointPool, metrics: PickerMetrics) -> None:
        self.pool = pool
        self.metrics = metrics

    async def Process(
        self, request_iterator: AsyncIterator[pb.ProcessingRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ProcessingResponse]:
        stream = RequestStream(self.pool, self.metrics)
        try:
            async for message in request_iterator:
                for answer in stream.handle(message):
                    yield answer
                if stream.done:
                    return
        finally:
            stream.close()
