"""Strict call bodies: every bad known field is a 400 (an unknown model a 404) naming the field, before the
call is accepted; large input is never echoed; unknown fields pass through; routing honours ``model``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from types import SimpleNamespace
from typing import Any

import pytest

from slosched.core.request import Outcome
from slosched.gateway.calls.call import CHAT, COMPLETIONS, Call, HttpError, parse_call, parse_slo_headers, per_sequence
from slosched.gateway.calls.json_body import parse_json_object
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.http.hotpath import OpenAIRoutes
from slosched.gateway.ops.config import parse_config
from slosched.gateway.ops.identity import Identities
from slosched.gateway.ops.limits import TenantLimits
from slosched.gateway.ops.prometheus import counter_value
from tests.gateway.helpers import make_request

Message = MutableMapping[str, Any]
BACKENDS = [
    {"name": "b0", "url": "http://127.0.0.1:9", "model": "tiny", "max_model_len": 2048},
    {"name": "b1", "url": "http://127.0.0.1:10", "model": "big", "max_model_len": 8192},
    {"name": "b2", "url": "http://127.0.0.1:11", "model": "big", "max_model_len": 4096},
]


def make_routes() -> tuple[OpenAIRoutes, list[Call]]:
    config = parse_config({"backends": BACKENDS})
    dispatcher = Dispatcher(config, clock=lambda: 0.0)
    access = SimpleNamespace(
        identities=Identities.from_config(config), limits=TenantLimits(dispatcher.clock, dispatcher.metrics)
    )
    routes = OpenAIRoutes(config, dispatcher, access)
    seen: list[Call] = []

    async def complete(call: Call) -> tuple[int, bytes]:
        seen.append(call)
        routes.dispatcher.finish(call, Outcome.COMPLETED, "ok")
        return 200, b"{}"

    routes.dispatcher.complete = complete  # type: ignore[method-assign]
    return routes, seen


def post(
    routes: OpenAIRoutes, path: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    raw = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in (headers or {}).items()]
    scope = {"type": "http", "method": "POST", "headers": raw}
    asyncio.run(routes(scope, receive, send, path))
    return sent[0]["status"], json.loads(sent[1]["body"])


P = {"prompt": "hello"}
M = {"messages": [{"role": "user", "content": "hi"}]}
BAD = [
    (COMPLETIONS, {**P, "n": -1}, 400, "n:"),
    (COMPLETIONS, {**P, "n": 1e8}, 400, "n:"),
    (COMPLETIONS, {**P, "n": 17}, 400, "n:"),
    (COMPLETIONS, {**P, "best_of": 0}, 400, "best_of:"),
    (COMPLETIONS, {**P, "max_tokens": 1e12}, 400, "max_tokens:"),
    (COMPLETIONS, {**P, "max_tokens": 0}, 400, "max_tokens:"),
    (COMPLETIONS, {**P, "max_tokens": 10**12}, 400, "max_model_len of 8192"),
    (COMPLETIONS, {**P, "model": "tiny", "max_tokens": 2049}, 400, "max_model_len of 2048"),
    (COMPLETIONS, {"prompt": list(range(2000)), "model": "tiny", "max_tokens": 100}, 400, "max_tokens:"),
    (COMPLETIONS, {**P, "max_tokens": "5"}, 400, "max_tokens:"),
    (COMPLETIONS, {**P, "temperature": -0.1}, 400, "temperature:"),
    (COMPLETIONS, {**P, "temperature": 1e308}, 400, "temperature:"),
    (COMPLETIONS, {**P, "top_p": 0}, 400, "top_p:"),
    (COMPLETIONS, {**P, "top_k": -2}, 400, "top_k:"),
    (COMPLETIONS, {**P, "presence_penalty": 3}, 400, "presence_penalty:"),
    (COMPLETIONS, {**P, "frequency_penalty": -3}, 400, "frequency_penalty:"),
    (COMPLETIONS, {**P, "repetition_penalty": 0}, 400, "repetition_penalty:"),
    (COMPLETIONS, {**P, "seed": 2**64}, 400, "seed:"),
    (COMPLETIONS, {**P, "logprobs": 21}, 400, "logprobs:"),
    (COMPLETIONS, {**P, "stop": ["a"] * 17}, 400, "stop:"),
    (COMPLETIONS, {**P, "stream": "yes"}, 400, "stream:"),
    (COMPLETIONS, {**P, "stream_options": {"include_usage": "no"}}, 400, "stream_options.include_usage:"),
    (COMPLETIONS, {"prompt": ""}, 400, "prompt:"),
    (COMPLETIONS, {"prompt": []}, 400, "prompt:"),
    (COMPLETIONS, {"prompt": [[1, 2], []]}, 400, "prompt:"),
    (COMPLETIONS, {"prompt": [1, -2]}, 400, "prompt:"),
    (COMPLETIONS, {"prompt": ["a"] * 1025}, 400, "prompt:"),
    (COMPLETIONS, {}, 400, "prompt:"),
    (COMPLETIONS, {**P, "model": 3}, 400, "model:"),
    (COMPLETIONS, {**P, "model": "gpt-4"}, 404, "model: 'gpt-4' is not served here; served: big, tiny"),
    (CHAT, {"messages": []}, 400, "messages:"),
    (CHAT, {"messages": "hi"}, 400, "messages:"),
    (CHAT, {"messages": [{"content": "hi"}]}, 400, "messages[0].role:"),
    (CHAT, {"messages": [{"role": "", "content": "hi"}]}, 400, "messages[0].role:"),
    (CHAT, {"messages": [{"role": 5, "content": "hi"}]}, 400, "messages[0].role:"),
    (CHAT, {"messages": [{"role": "user", "content": 5}]}, 400, "messages[0].content:"),
    (CHAT, {"messages": [{"role": "user", "content": [{"text": "x"}]}]}, 400, "messages[0].content:"),
    (CHAT, {**M, "max_completion_tokens": 0}, 400, "max_completion_tokens:"),
    (CHAT, {**M, "max_completion_tokens": 9000}, 400, "max_completion_tokens:"),
    (CHAT, {**M, "top_logprobs": 99}, 400, "top_logprobs:"),
    (CHAT, {**M, "logprobs": 3}, 400, "logprobs:"),
]


@pytest.mark.parametrize(("path", "body", "status", "names"), BAD)
def test_each_bad_field_is_refused_naming_it(path: str, body: dict[str, Any], status: int, names: str) -> None:
    routes, seen = make_routes()
    code, answer = post(routes, path, json.dumps(body).encode())
    assert code == status, answer
    assert names in answer["error"]["message"]
    assert answer["error"]["type"] == ("model_not_found" if status == 404 else "invalid_request")
    assert answer["error"]["param"] == names.split(":")[0] or status == 404 or "max_model_len" in names
    assert (
        not seen and counter_value(routes.dispatcher.metrics, "slosched:requests_accepted_total") == 0
    )  # refused before acceptance


GOOD = [
    (COMPLETIONS, {"prompt": "hi", "max_tokens": 4, "n": 16, "temperature": 0, "top_p": 1, "seed": -1}),
    (COMPLETIONS, {"prompt": [[1, 2], [3]], "model": "tiny", "stop": "x", "vllm_xargs": {"a": 1}, "odd": None}),
    (COMPLETIONS, {"prompt": ["a", "b"], "model": "big", "max_tokens": 8000, "stream_options": None}),
    (CHAT, {**M, "max_completion_tokens": 4, "logprobs": True, "top_logprobs": 2, "tools": [{"type": "function"}]}),
    (
        CHAT,
        {
            "messages": [
                {"role": "assistant", "content": None, "tool_calls": []},
                {"role": "ipython"},
                {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "image_url"}]},
            ]
        },
    ),
]


@pytest.mark.parametrize(("path", "body"), GOOD)
def test_good_bodies_are_accepted_and_forwarded_untouched(path: str, body: dict[str, Any]) -> None:
    routes, seen = make_routes()
    assert post(routes, path, json.dumps(body).encode())[0] == 200
    assert seen[0].body == body  # unknown fields pass through to vLLM
    assert seen[0].model == body.get("model")


def test_errors_never_echo_large_input() -> None:
    routes, _ = make_routes()
    _, answer = post(routes, COMPLETIONS, json.dumps({**P, "model": "m" * 10_000}).encode())
    assert len(answer["error"]["message"]) < 200
    _, answer = post(routes, COMPLETIONS, json.dumps({"prompt": "x", "stop": "y" * 10_000, "n": 0}).encode())
    assert "yyyy" not in answer["error"]["message"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"prompt": ' + b"[" * 100 + b"]" * 100 + b"}", "nested deeper than 64"),
        (b"[" * 100_000, "nested deeper than 64"),
        (b'{"prompt": "x", "seed": ' + b"9" * 5000 + b"}", "integer literal longer than 32 digits"),
        (b'{"prompt": "x", "seed": -' + b"9" * 5000 + b"}", "integer literal longer than 32 digits"),
    ],
)
def test_deep_json_and_huge_integers_are_400_not_500(raw: bytes, message: str) -> None:
    routes, _ = make_routes()
    status, answer = post(routes, COMPLETIONS, raw)
    assert status == 400 and message in answer["error"]["message"]


def test_json_bounds_leave_ordinary_bodies_alone() -> None:
    assert parse_json_object(b'{"a": "' + b"[" * 500 + b'", "b": [[[1]]]}')["b"] == [[[1]]]  # brackets in strings
    assert parse_json_object(b'{"a": NaN, "b": 123456789012345678901234567890}')["b"] == 123456789012345678901234567890
    with pytest.raises(HttpError):
        parse_json_object(b'{"a": ' + b"[" * 65 + b"]" * 65 + b"}")
    assert parse_json_object(b'{"a": ' + b"[" * 63 + b"]" * 63 + b"}")


def test_routing_honours_the_model() -> None:
    dispatcher = Dispatcher(parse_config({"backends": BACKENDS, "policies": {"router": "round-robin"}}))
    picks = {dispatcher.choose(make_request(i, 0.0), set(), "big").index for i in range(6)}
    assert picks == {1, 2}
    assert {dispatcher.choose(make_request(i, 0.0), set(), "tiny").index for i in range(3)} == {0}
    assert dispatcher.choose(make_request(0, 0.0), {1}, "big").index == 2
    with pytest.raises(HttpError) as error:
        dispatcher.choose(make_request(0, 0.0), {1, 2}, "big")
    assert error.value.status == 503 and "big" in error.value.message
    with pytest.raises(HttpError) as error:
        dispatcher.choose(make_request(0, 0.0), set(), "nope")
    assert error.value.status == 404


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        (None, None),
        ("application/json", None),
        ("application/json; charset=utf-8", None),
        ("application/vnd.api+json", None),
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
    ],
)
def test_json_media_type(content_type: str | None, status: int | None) -> None:
    from slosched.gateway.calls.json_body import check_json_media_type

    if status is None:
        check_json_media_type(content_type)
        return
    with pytest.raises(HttpError) as raised:
        check_json_media_type(content_type)
    assert raised.value.status == 415 and "content-type" in raised.value.message


def test_slo_header_errors_are_short_and_stage_names_bounded() -> None:
    from slosched.gateway.calls.call import parse_slo_headers

    for name in ("x-slo-deadline-ms", "x-slo-priority"):
        with pytest.raises(HttpError) as raised:
            parse_slo_headers({name: "9" * 5000 + "x"})
        assert name in raised.value.message and len(raised.value.message) < 200
    with pytest.raises(HttpError, match="x-job-stage"):
        parse_slo_headers({"x-job-stage": "s" * 129})
    assert parse_slo_headers({"x-job-stage": "s" * 128}).stage == "s" * 128


def test_a_batch_of_prompts_is_held_to_the_model_length_prompt_by_prompt_and_charged_whole() -> None:
    """vLLM holds each prompt of a batch to ``max_model_len`` on its own: ten prompts of ~1,000 tokens fit a
    2,048-token model (refused before, by their sum), and the call is charged for all of them."""
    slo, models = parse_slo_headers({}), {"tiny": 2048}
    batch = parse_call(COMPLETIONS, {"prompt": ["x" * 4000] * 10, "max_tokens": 16}, slo, 0.0, 256, models)
    assert batch.request.prompt_tokens == 1000 and batch.sequences == 10
    assert batch.token_cost == 10 * 1000 + 10 * 16
    ids = parse_call(COMPLETIONS, {"prompt": [[1] * 30, [2] * 1500], "max_tokens": 8, "n": 3}, slo, 0.0, 256, models)
    assert ids.request.prompt_tokens == 1500 and ids.sequences == 6 and ids.token_cost == 1530 + 6 * 8
    with pytest.raises(HttpError, match="max_model_len of 2048") as refused:
        parse_call(COMPLETIONS, {"prompt": ["x", "x" * 20000], "max_tokens": 16}, slo, 0.0, 256, models)
    assert refused.value.param == "max_tokens"  # one prompt alone is surely too long: refused, naming the field
    chat = parse_call(CHAT, {"messages": [{"role": "user", "content": "hi"}], "n": 4}, slo, 0.0, 32, models)
    assert chat.sequences == 4 and chat.token_cost == chat.request.prompt_tokens + 4 * 32


def test_a_finished_call_teaches_one_sequence_s_share_of_its_output() -> None:
    assert per_sequence(90, 1) == 90 and per_sequence(90, 3) == 30
    assert per_sequence(1, 4) == 1 and per_sequence(0, 4) == 0  # a token is a token; nothing stays nothing
