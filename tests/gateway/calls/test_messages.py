"""Anthropic's Messages API: the body validated as vLLM types it, read as a chat call of its text."""

from __future__ import annotations

from typing import Any

import pytest

from slosched.gateway.calls.call import HttpError, parse_slo_headers
from slosched.gateway.calls.messages import MESSAGES, parse_messages_call

SLO = parse_slo_headers({"x-slo-deadline-ms": "4000"})
MODELS = {"tiny": 2048}


def _body(**fields: Any) -> dict[str, Any]:
    return {"model": "tiny", "max_tokens": 32, "messages": [{"role": "user", "content": "x" * 400}], **fields}


def test_a_messages_body_is_the_chat_call_of_its_text_and_is_forwarded_untouched() -> None:
    body = _body(system="s" * 80, metadata={"user_id": "u"})
    call = parse_messages_call(body, SLO, 10.0, MODELS)
    assert call.path == MESSAGES and call.body is body and call.model == "tiny" and not call.stream
    request = call.request
    assert request.max_output_tokens == 32 and request.template == "chat"
    assert request.prompt_tokens == (400 + 80) // 4 + 2 * 4  # text / 4 + the template's tokens per message
    assert request.deadline_s == pytest.approx(14.0)


def test_blocks_count_their_text_thinking_tool_input_and_tool_results() -> None:
    blocks = [
        {"type": "text", "text": "a" * 40},
        {"type": "thinking", "thinking": "b" * 40, "signature": "sig"},
        {"type": "tool_use", "id": "t1", "name": "sql", "input": {"query": "c" * 30}},
        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "d" * 40}]},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
    ]
    call = parse_messages_call(_body(messages=[{"role": "assistant", "content": blocks}], stream=True), SLO, 0.0)
    assert call.stream and call.request.prompt_tokens == (40 + 40 + len('{"query":"' + "c" * 30 + '"}') + 40) // 4 + 4


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "tiny", "messages": [{"role": "user", "content": "x"}]}, 400, "max_tokens"),
        ({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}, 400, "model"),
        (_body(max_tokens=0), 400, "max_tokens"),
        (_body(max_tokens="8"), 400, "max_tokens"),
        (_body(messages=[]), 400, "messages"),
        (_body(messages=[{"role": "robot", "content": "x"}]), 400, "messages[0].role"),
        (_body(messages=[{"role": "user", "content": 5}]), 400, "messages[0].content"),
        (_body(messages=[{"role": "user", "content": [{"text": "no type"}]}]), 400, "messages[0].content[0].type"),
        (_body(stream="yes"), 400, "stream"),
        (_body(vllm_xargs={"slosched_priority": 0}), 400, "vllm_xargs.slosched_priority"),
        (_body(model="other"), 404, "model"),
        (_body(max_tokens=2000, messages=[{"role": "user", "content": "x" * 4000}]), 400, "max_tokens"),
    ],
)
def test_a_body_vllm_would_refuse_is_a_400_naming_the_field(body: dict[str, Any], status: int, param: str) -> None:
    with pytest.raises(HttpError) as refused:
        parse_messages_call(body, SLO, 0.0, MODELS)
    assert (refused.value.status, refused.value.param) == (status, param), str(refused.value)
