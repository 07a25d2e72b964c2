"""``gateway.http.hotpath``: the plain-ASGI OpenAI routes on a real ``Dispatcher`` whose backend side is faked
(``complete``/``open``/``relay`` replaced: no servers, no sockets). Errors answer JSON with the right status
and ``Retry-After``; every accepted call ends in exactly one terminal outcome, a client that leaves
mid-stream included."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from types import SimpleNamespace
from typing import Any

import pytest

from slosched.core.request import Outcome
from slosched.gateway.calls.call import COMPLETIONS, Call, HttpError
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.http.hotpath import HOT_PATHS, OpenAIRoutes, _headers, send_error
from slosched.gateway.ops.config import parse_config
from slosched.gateway.ops.identity import Identities
from slosched.gateway.ops.limits import TenantLimits
from slosched.gateway.ops.prometheus import counter_value

Message = MutableMapping[str, Any]
BODY = json.dumps({"prompt": "hello there", "max_tokens": 4}).encode()


def make_routes(**overrides: Any) -> OpenAIRoutes:
    config = parse_config(
        {"backends": [{"name": "b0", "url": "http://127.0.0.1:9", "max_concurrency": 2}], **overrides}
    )
    dispatcher = Dispatcher(config, clock=lambda: 0.0)
    access = SimpleNamespace(
        identities=Identities.from_config(config), limits=TenantLimits(dispatcher.clock, dispatcher.metrics)
    )
    return OpenAIRoutes(config, dispatcher, access)


def outcomes(routes: OpenAIRoutes) -> dict[str, float]:
    result: dict[str, float] = {}
    for family in routes.dispatcher.metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "slosched:requests_total" and sample.value:
                result[f"{sample.labels['outcome']}/{sample.labels['reason']}"] = sample.value
    return result


def receiver(messages: list[Message], then: Message | None = None) -> Callable[[], Awaitable[Message]]:
    """Hands out ``messages`` in order, then ``then`` (after a yield), or blocks forever when ``then`` is None."""
    queue = list(messages)

    async def receive() -> Message:
        if queue:
            return queue.pop(0)
        if then is None:
            await asyncio.Event().wait()
        await asyncio.sleep(0)
        assert then is not None
        return then

    return receive


def request(
    routes: OpenAIRoutes,
    body: bytes = BODY,
    method: str = "POST",
    headers: list[tuple[bytes, bytes]] | None = None,
    chunks: list[bytes] | None = None,
    then: Message | None = None,
) -> list[Message]:
    parts = chunks if chunks is not None else [body]
    messages: list[Message] = [
        {"type": "http.request", "body": part, "more_body": index < len(parts) - 1} for index, part in enumerate(parts)
    ]
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "headers": headers or []}
    asyncio.run(routes(scope, receiver(messages, then), send, COMPLETIONS))
    return sent


def status_and_json(sent: list[Message]) -> tuple[int, dict[str, str], Any]:
    start, body = sent
    headers = {name.decode(): value.decode() for name, value in start["headers"]}
    return start["status"], headers, json.loads(body["body"])


def test_paths_and_headers() -> None:
    assert HOT_PATHS[COMPLETIONS + "/"] == COMPLETIONS
    raw = [(b"X-Tenant", b"a"), (b"x-tenant", b"b"), (b"Authorization", b"Bearer \xe9")]
    assert _headers(raw) == {"x-tenant": "a", "authorization": "Bearer \xe9"}


def test_send_error_rounds_retry_after_up_to_whole_seconds() -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(send_error(send, HttpError(429, "rate_limited", "slow down", 0.2)))
    asyncio.run(send_error(send, HttpError(503, "no_backend", "down", 2.5)))
    asyncio.run(send_error(send, HttpError(400, "invalid_request", "bad")))
    statuses = [status_and_json(sent[i : i + 2]) for i in range(0, 6, 2)]
    assert [(s, h.get("retry-after")) for s, h, _ in statuses] == [(429, "1"), (503, "3"), (400, None)]
    assert statuses[0][2] == {"error": {"message": "slow down", "type": "rate_limited", "code": 429}}
    assert statuses[0][1]["content-length"] == str(len(sent[1]["body"]))


def test_a_completed_call_answers_the_backend_body_once() -> None:
    routes = make_routes()
    seen: list[Call] = []

    async def complete(call: Call) -> tuple[int, bytes]:
        seen.append(call)
        routes.dispatcher.finish(call, Outcome.COMPLETED, "ok")
        return 200, b'{"choices": []}'

    routes.dispatcher.complete = complete  # type: ignore[method-assign]
    sent = request(routes, chunks=[BODY[:5], BODY[5:]])  # a body in two parts is joined
    assert status_and_json(sent)[0::2] == (200, {"choices": []})
    assert seen[0].request.max_output_tokens == 4 and seen[0].stream is False
    assert outcomes(routes) == {"completed/ok": 1.0}
    assert counter_value(routes.dispatcher.metrics, "slosched:requests_accepted_total") == 1.0


@pytest.mark.parametrize(
    ("kwargs", "status", "code"),
    [
        ({"method": "GET"}, 405, "method_not_allowed"),
        ({"body": b"[1, 2]"}, 400, "invalid_request"),
        ({"body": b"{not json"}, 400, "invalid_request"),
        ({"body": json.dumps({"prompt": "x", "max_tokens": -1}).encode()}, 400, "invalid_request"),
        ({"headers": [(b"content-length", b"999999999")]}, 413, "body_too_large"),
        ({"headers": [(b"content-length", b"12x")]}, 413, "body_too_large"),
        ({"chunks": [b" " * 1024] * 2}, 413, "body_too_large"),
    ],
)
def test_refusals_before_acceptance_finish_nothing(kwargs: dict[str, Any], status: int, code: str) -> None:
    routes = make_routes(max_body_bytes=1024)
    answer, _, payload = status_and_json(request(routes, **kwargs))
    assert (answer, payload["error"]["type"]) == (status, code)
    assert outcomes(routes) == {}


def test_api_keys() -> None:
    routes = make_routes(api_keys=["secret"])
    routes.dispatcher.complete = _completes(routes)  # type: ignore[method-assign,assignment]
    assert status_and_json(request(routes))[0] == 401
    assert status_and_json(request(routes, headers=[(b"authorization", b"Bearer nope")]))[0] == 401
    assert status_and_json(request(routes, headers=[(b"authorization", b"Bearer secret")]))[0] == 200
    assert status_and_json(request(routes, headers=[(b"x-api-key", b"secret")]))[0] == 200


def _completes(routes: OpenAIRoutes) -> Callable[[Call], Coroutine[Any, Any, tuple[int, bytes]]]:
    async def complete(call: Call) -> tuple[int, bytes]:
        routes.dispatcher.finish(call, Outcome.COMPLETED, "ok")
        return 200, b"{}"

    return complete


def test_rate_limited_tenants_get_429_with_retry_after() -> None:
    routes = make_routes(tenant_rate_limits={"slow": 0.5}, trust_tenant_header=True)
    routes.dispatcher.complete = _completes(routes)  # type: ignore[method-assign,assignment]
    tenant = [(b"x-tenant", b"slow")]
    assert status_and_json(request(routes, headers=tenant))[0] == 200
    status, headers, payload = status_and_json(request(routes, headers=tenant))
    assert (status, headers["retry-after"], payload["error"]["type"]) == (429, "2", "rate_limited")
    assert status_and_json(request(routes))[0] == 200  # other tenants are not limited
    metrics = routes.dispatcher.metrics
    assert counter_value(metrics, "slosched:admission_rejections_total", [("reason", "rate_limited")]) == 1.0
    assert outcomes(routes) == {"completed/ok": 2.0}


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (HttpError(503, "no_backend", "down", 1.0), "rejected/no_backend"),
        (HttpError(429, "queue_full", "full", 1.0), "rejected/queue_full"),
        (HttpError(502, "backend_failed", "broken"), "failed/backend_failed"),
    ],
)
def test_backend_errors_finish_the_call_once(error: HttpError, outcome: str) -> None:
    routes = make_routes()

    async def complete(call: Call) -> tuple[int, bytes]:
        raise error

    routes.dispatcher.complete = complete  # type: ignore[method-assign]
    status, _, payload = status_and_json(request(routes))
    assert (status, payload["error"]["type"]) == (error.status, error.code)
    assert outcomes(routes) == {outcome: 1.0}


def test_an_unexpected_error_is_a_logged_500_and_the_call_is_finished() -> None:
    routes = make_routes()

    async def complete(call: Call) -> tuple[int, bytes]:
        raise RuntimeError("bug")

    routes.dispatcher.complete = complete  # type: ignore[method-assign]
    status, _, payload = status_and_json(request(routes))
    assert (status, payload["error"]["type"]) == (500, "internal_error")
    assert outcomes(routes) == {"cancelled/cancelled": 1.0}


def test_a_client_gone_before_its_body_ends_gets_nothing() -> None:
    routes = make_routes()
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    first: Message = {"type": "http.request", "body": BODY[:5], "more_body": True}
    scope = {"type": "http", "method": "POST", "headers": []}
    asyncio.run(routes(scope, receiver([first], {"type": "http.disconnect"}), send, COMPLETIONS))
    assert sent == [] and outcomes(routes) == {}  # never accepted: nothing to finish


class FakeResponse:
    status = 200
    complete = False

    def header(self, name: bytes) -> str | None:
        return "text/event-stream" if name == b"content-type" else None


def _streaming(routes: OpenAIRoutes, hang: bool) -> list[str]:
    """Fake ``open``/``relay``: relay writes one chunk, then either ends or waits for the backend forever."""
    events: list[str] = []
    dispatcher = routes.dispatcher

    async def open_call(call: Call) -> Any:
        return SimpleNamespace(response=FakeResponse())

    async def relay(call: Call, attempt: Any, write: Callable[[bytes, bool], Awaitable[None]]) -> None:
        try:
            await write(b"data: 1\n\n", False)
            if hang:
                await asyncio.Event().wait()
            await write(b"data: [DONE]\n\n", True)
            dispatcher.finish(call, Outcome.COMPLETED, "ok")
        finally:
            events.append("relay-ended")
            dispatcher.finish(call, Outcome.CANCELLED, "client_disconnected")

    async def abandon(call: Call, attempt: Any) -> None:
        events.append("abandon")

    dispatcher.open = open_call  # type: ignore[method-assign]
    dispatcher.relay = relay  # type: ignore[method-assign]
    dispatcher.abandon = abandon  # type: ignore[method-assign]
    return events


def test_a_stream_is_relayed_with_its_media_type() -> None:
    routes = make_routes()
    events = _streaming(routes, hang=False)
    sent = request(routes, body=json.dumps({"prompt": "x", "stream": True}).encode())
    start, *chunks = sent
    assert start["status"] == 200
    assert dict(start["headers"])[b"content-type"] == b"text/event-stream; charset=utf-8"
    assert [(c["body"], c["more_body"]) for c in chunks] == [(b"data: 1\n\n", True), (b"data: [DONE]\n\n", False)]
    assert events == ["relay-ended", "abandon"]
    assert outcomes(routes) == {"completed/ok": 1.0}


def test_a_client_leaving_mid_stream_cancels_the_relay_and_finishes_the_call_once() -> None:
    routes = make_routes()
    events = _streaming(routes, hang=True)
    body = json.dumps({"prompt": "x", "stream": True}).encode()
    sent = request(routes, body=body, then={"type": "http.disconnect"})
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert events == ["relay-ended", "abandon"]
    assert outcomes(routes) == {"cancelled/client_disconnected": 1.0}
