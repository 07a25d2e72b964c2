"""The stub's Responses API, in vLLM's shapes: ``POST /v1/responses`` (a response, or its event stream),
responses kept in the server's memory as vLLM keeps them, ``GET /v1/responses/{id}`` and ``POST .../cancel``
answered only where the response was made, and a ``previous_response_id`` this server never made refused with
vLLM's 404: what the gateway's routing of follow-ups is tested against."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse


class _Behaviour(Protocol):
    default_tokens: int
    token_delay_s: float


class StubServer(Protocol):
    """What these routes use of the stub (``devtools.stub.StubBackend``)."""

    received: list[tuple[str, dict[str, Any]]]
    responses: dict[str, dict[str, Any]]

    @property
    def behaviour(self) -> _Behaviour: ...


def _not_found(response_id: str) -> Response:
    error = {"message": f"Response with id '{response_id}' not found.", "type": "NotFoundError", "code": 404}
    return JSONResponse({"error": error}, status_code=404)


async def create(stub: StubServer, request: Request) -> Response:
    body = json.loads(await request.body())
    stub.received.append((request.url.path, body))
    previous = body.get("previous_response_id")
    if previous is not None and previous not in stub.responses:
        return _not_found(previous)
    tokens = int(body.get("max_output_tokens") or stub.behaviour.default_tokens)
    response_id = f"resp_{os.urandom(16).hex()}"
    content = [{"type": "output_text", "text": "x " * tokens, "annotations": []}]
    message = {"type": "message", "id": f"msg_{os.urandom(8).hex()}", "role": "assistant", "content": content}
    usage = {"input_tokens": 4, "output_tokens": tokens, "total_tokens": tokens + 4}
    done = {"id": response_id, "object": "response", "status": "completed", "model": body.get("model")}
    done.update(output=[message], usage=usage)
    stub.responses[response_id] = done
    if body.get("stream"):
        return StreamingResponse(_events(stub, done, tokens), media_type="text/event-stream")
    await asyncio.sleep(stub.behaviour.token_delay_s * tokens)
    return JSONResponse(done)


async def _events(stub: StubServer, done: dict[str, Any], tokens: int) -> AsyncIterator[bytes]:
    def event(name: str, number: int, **data: Any) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, 'sequence_number': number, **data})}\n\n".encode()

    started = {**done, "status": "in_progress", "output": [], "usage": None}
    yield event("response.created", 0, response=started)
    for index in range(tokens):
        if stub.behaviour.token_delay_s:
            await asyncio.sleep(stub.behaviour.token_delay_s)
        yield event("response.output_text.delta", index + 1, item_id="msg", output_index=0, delta="x ")
    yield event("response.completed", tokens + 1, response=done)


async def retrieve(stub: StubServer, request: Request) -> Response:
    """The stored response, or (``?stream=true``, as vLLM replays a background response) its events again."""
    response_id = request.path_params["response_id"]
    stub.received.append((request.url.path, {}))
    found = stub.responses.get(response_id)
    if found is None:
        return _not_found(response_id)
    if request.query_params.get("stream") == "true":
        events = _events(stub, found, int(found["usage"]["output_tokens"]))
        return StreamingResponse(events, media_type="text/event-stream")
    return JSONResponse(found)


async def cancel(stub: StubServer, request: Request) -> Response:
    response_id = request.path_params["response_id"]
    stub.received.append((request.url.path, {}))
    found = stub.responses.get(response_id)
    return _not_found(response_id) if found is None else JSONResponse({**found, "status": "cancelled"})
