"""Envoy ext_proc messages the picker reads and writes (the ``xds-protos`` stubs of ``envoy.service.ext_proc.v3``).

Answers follow the Gateway API Inference Extension's endpoint picker protocol: the chosen endpoints (primary
first, then fallbacks, comma-separated ``ip:port``) are set as the ``x-gateway-destination-endpoint``
request header *and* under the same key in the response's dynamic metadata, namespace ``envoy.lb`` (one value
in both places: the protocol leaves precedence undefined). The header overwrites any value the client sent,
so a client cannot pick its own endpoint, and the route cache is cleared so Envoy routes on it. A refusal is an
``ImmediateResponse`` with the gateway's status and OpenAI-style JSON error (503: no ready endpoint, 429:
every queue full, 404: unknown model, 400/413: a bad body).
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson
from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from envoy.type.v3 import http_status_pb2
from google.protobuf import struct_pb2

from slosched.gateway.calls.call import HttpError, error_document, retry_after_header
from slosched.picker.config import SERVED_KEY, SUBSET_KEY, SUBSET_NAMESPACE, PickerConfig

_MODES = processing_mode_pb2.ProcessingMode.BodySendMode
NONE = _MODES.Value("NONE")
STREAMED = _MODES.Value("STREAMED")
BUFFERED = _MODES.Value("BUFFERED")
BUFFERED_PARTIAL = _MODES.Value("BUFFERED_PARTIAL")
FULL_DUPLEX = _MODES.Value("FULL_DUPLEX_STREAMED")
_OVERWRITE = base_pb2.HeaderValueOption.HeaderAppendAction.Value("OVERWRITE_IF_EXISTS_OR_ADD")


def header_map(headers: pb.HttpHeaders) -> dict[str, str]:
    """Lower-case name -> value; Envoy sends ``raw_value`` (bytes) in recent versions, ``value`` in older ones."""
    found: dict[str, str] = {}
    for header in headers.headers.headers:
        value = header.raw_value.decode("latin-1") if header.raw_value else header.value
        found.setdefault(header.key.lower(), value)
    return found


def subset_hint(message: pb.ProcessingRequest) -> list[str] | None:
    """The proxy's subset (``envoy.lb.subset_hint`` / ``x-gateway-destination-endpoint-subset``); None if unset."""
    if not message.HasField("metadata_context"):
        return None
    namespace = message.metadata_context.filter_metadata.get(SUBSET_NAMESPACE)
    if namespace is None or SUBSET_KEY not in namespace.fields:
        return None
    value = namespace.fields[SUBSET_KEY]
    if value.WhichOneof("kind") == "list_value":
        return [item.string_value for item in value.list_value.values]
    return [part.strip() for part in value.string_value.split(",") if part.strip()]


def served_endpoint(message: pb.ProcessingRequest, namespace: str) -> str | None:
    """The endpoint the proxy reports as having served the call (``x-gateway-destination-endpoint-served``)."""
    if not message.HasField("metadata_context"):
        return None
    fields = message.metadata_context.filter_metadata.get(namespace)
    if fields is None or SERVED_KEY not in fields.fields:
        return None
    return fields.fields[SERVED_KEY].string_value or None


def _set(key: str, value: str) -> base_pb2.HeaderValueOption:
    return base_pb2.HeaderValueOption(
        header=base_pb2.HeaderValue(key=key, raw_value=value.encode("latin-1")), append_action=_OVERWRITE
    )


def destination(endpoints: Iterable[str], config: PickerConfig, content_length: int | None) -> pb.CommonResponse:
    """The header half of an answer: set the destination (and the length of a body sent back whole)."""
    headers = [_set(config.destination_header, ",".join(endpoints))]
    if content_length is not None:
        headers.append(_set("content-length", str(content_length)))
    return pb.CommonResponse(header_mutation=pb.HeaderMutation(set_headers=headers), clear_route_cache=True)


def destination_metadata(endpoints: Iterable[str], config: PickerConfig) -> struct_pb2.Struct:
    """The metadata half: ``{namespace: {key: "ip:port,..."}}``."""
    metadata = struct_pb2.Struct()
    metadata.update({config.metadata_namespace: {config.destination_header: ",".join(endpoints)}})
    return metadata


def headers_answer(
    common: pb.CommonResponse | None = None, metadata: struct_pb2.Struct | None = None
) -> pb.ProcessingResponse:
    response = pb.ProcessingResponse(request_headers=pb.HeadersResponse(response=common or pb.CommonResponse()))
    if metadata is not None:
        response.dynamic_metadata.CopyFrom(metadata)
    return response


def body_answer(
    common: pb.CommonResponse | None = None, metadata: struct_pb2.Struct | None = None
) -> pb.ProcessingResponse:
    response = pb.ProcessingResponse(request_body=pb.BodyResponse(response=common or pb.CommonResponse()))
    if metadata is not None:
        response.dynamic_metadata.CopyFrom(metadata)
    return response


def streamed_body(body: bytes, end_of_stream: bool, response: bool = False) -> pb.ProcessingResponse:
    """A body chunk sent back in full-duplex mode (there, a chunk not sent back never reaches the other side)."""
    common = pb.CommonResponse(
        body_mutation=pb.BodyMutation(streamed_response=pb.StreamedBodyResponse(body=body, end_of_stream=end_of_stream))
    )
    if response:
        return pb.ProcessingResponse(response_body=pb.BodyResponse(response=common))
    return pb.ProcessingResponse(request_body=pb.BodyResponse(response=common))


def refusal(error: HttpError) -> pb.ProcessingResponse:
    """``ImmediateResponse``: Envoy answers the client with this status and body and never forwards."""
    headers = [_set("content-type", "application/json")]
    retry_after = retry_after_header(error)
    if retry_after is not None:
        headers.append(_set("retry-after", retry_after))
    immediate = pb.ImmediateResponse(
        status=http_status_pb2.HttpStatus(code=error.status),
        headers=pb.HeaderMutation(set_headers=headers),
        body=orjson.dumps(error_document(error)),
        details=f"slosched_picker_{error.code}",
    )
    return pb.ProcessingResponse(immediate_response=immediate)
