"""Hypothesis over the typed fields of call bodies (in range, out of range, wrong types) and SLO headers,
through the in-process call routes: never a 5xx; a refusal is a 4xx naming a field, with a short message."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.gateway.calls.call import CHAT, COMPLETIONS
from tests.gateway.calls.test_calls_bodies import make_routes, post

_numbers = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0, 1, -1, 16, 17, 1e8, 1e12, 2**63, 0.5, 2.0])
)
_scalars = _numbers | st.booleans() | st.none() | st.text(max_size=8)
_values = _scalars | st.lists(_scalars, max_size=3) | st.dictionaries(st.text(max_size=4), _scalars, max_size=2)
_typed = [
    "model",
    "max_tokens",
    "max_completion_tokens",
    "n",
    "best_of",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "min_p",
    "top_k",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "seed",
    "stop",
    "min_tokens",
    "user",
    "logprobs",
    "top_logprobs",
    "echo",
    "suffix",
    "priority",
    "vllm_xargs",
]
_prompts = (
    st.text(max_size=20)
    | st.lists(st.text(max_size=5), max_size=3)
    | st.lists(st.integers(min_value=-5, max_value=2**32), max_size=4)
    | st.lists(st.lists(st.integers(min_value=-1, max_value=50), max_size=3), max_size=3)
    | _scalars
)
_content = (
    st.text(max_size=10)
    | st.none()
    | _numbers
    | st.lists(
        st.fixed_dictionaries({}, optional={"type": st.text(max_size=5) | _numbers, "text": _scalars}), max_size=2
    )
)
_message = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["user", "system", "assistant", "tool", "x"]) | _numbers,
        "content": _content,
        "name": _scalars,
    },
)
_models = st.sampled_from(["tiny", "big", "gpt-4", "", "m" * 300]) | _scalars


@st.composite
def bodies(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    chat = draw(st.booleans())
    body: dict[str, Any] = draw(st.dictionaries(st.sampled_from(_typed), _values, max_size=5))
    if draw(st.booleans()):
        body["model"] = draw(_models)
    if chat:
        body["messages"] = draw(st.lists(_message, max_size=3) | _scalars)
    else:
        body["prompt"] = draw(_prompts)
    return (CHAT if chat else COMPLETIONS), body


_header_values = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12).map(str.strip)
_headers = st.dictionaries(
    st.sampled_from(
        [
            "x-slo-deadline-ms",
            "x-slo-ttft-ms",
            "x-slo-tpot-ms",
            "x-slo-priority",
            "x-job-id",
            "x-job-stage",
            "content-length",
        ]
    ),
    _header_values | st.sampled_from(["nan", "inf", "-1", "0", "1e12", "100", "", "9" * 40]),
    max_size=3,
)


@settings(max_examples=400, deadline=None)
@given(case=bodies(), headers=_headers)
def test_typed_fields_never_5xx_and_refusals_name_a_field(
    case: tuple[str, dict[str, Any]], headers: dict[str, str]
) -> None:
    path, body = case
    routes, _ = make_routes()
    status, answer = post(routes, path, json.dumps(body).encode(), headers)
    assert status in (200, 400, 404, 413), (body, answer)
    if status != 200:
        message = answer["error"]["message"]
        assert ":" in message and len(message) < 400, message


@settings(max_examples=150, deadline=None)
@given(raw=st.binary(max_size=200) | st.from_regex(rb"\A[\[\]{}\"0-9:,a ]{0,300}\Z"))
def test_raw_bytes_never_5xx(raw: bytes) -> None:
    routes, _ = make_routes()
    status, _ = post(routes, COMPLETIONS, raw)
    assert status in (200, 400, 404)
