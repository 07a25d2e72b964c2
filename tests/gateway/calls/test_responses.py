"""The Responses API: the body validated as vLLM types the fields the gateway reads, read as a chat call of
its text; which backend made each stored response, and for whom."""

from __future__ import annotations

from typing import Any

import pytest

from slosched.gateway.calls.call import HttpError, parse_slo_headers
from slosched.gateway.calls.responses import RESPONSES, parse_responses_call
from slosched.gateway.dispatch.response_owners import ResponseOwners, response_id

SLO = parse_slo_headers({"x-slo-deadline-ms": "4000"})
MODELS = {"tiny": 2048}


def test_a_responses_body_is_the_chat_call_of_its_text_and_is_forwarded_untouched() -> None:
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "a" * 40}]},
        {"type": "function_call", "call_id": "c1", "name": "sql", "arguments": "b" * 40},
        {"type": "function_call_output", "call_id": "c1", "output": "c" * 40},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "d" * 40}]},
    ]
    body = {"model": "tiny", "input": items, "instructions": "i" * 40, "max_output_tokens": 12, "store": True}
    call = parse_responses_call(body, SLO, 10.0, 64, MODELS)
    assert call.path == RESPONSES and call.body is body and call.model == "tiny" and call.pinned is None
    assert call.request.max_output_tokens == 12 and call.request.deadline_s == pytest.approx(14.0)
    assert call.request.prompt_tokens == 200 // 4 + 2 * 4  # the text of every item and the instructions
    plain = parse_responses_call({"input": "hello there", "stream": True}, SLO, 0.0, 64, MODELS)
    assert plain.stream and plain.model is None and plain.request.max_output_tokens == 64  # the gateway's default


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "tiny"}, "input"),
        ({"input": ""}, "input"),
        ({"input": []}, "input"),
        ({"input": 5}, "input"),
        ({"input": ["x"]}, "input[0]"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "x", "max_output_tokens": 5000}, "max_output_tokens"),
        ({"input": "x", "previous_response_id": 5}, "previous_response_id"),
        ({"input": "x", "stream": "yes"}, "stream"),
        ({"input": "x", "background": True}, "background"),
        ({"input": "x", "vllm_xargs": {"slosched_tenant": "b"}}, "vllm_xargs.slosched_tenant"),
    ],
)
def test_a_body_vllm_would_refuse_is_a_400_naming_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(HttpError) as refused:
        parse_responses_call(body, SLO, 0.0, 64, MODELS)
    assert (refused.value.status, refused.value.param) == (400, param), str(refused.value)
    assert refused.value.message.startswith(param)


def test_owners_answer_only_their_tenant_and_keep_the_newest() -> None:
    owners = ResponseOwners(limit=2)
    for index, tenant in enumerate(("a", "b", "a")):
        owners.record(f"resp_{index}", f"backend-{index}", tenant)
    assert owners.owner("resp_0", "a") is None  # forgotten: the oldest of three
    assert owners.owner("resp_1", "a") is None and owners.owner("resp_1", "b") is not None  # another tenant's
    found = owners.owner("resp_2", "a")
    assert found is not None and found.backend == "backend-2" and len(owners) == 2


def test_the_response_id_is_the_object_s_own_not_an_output_item_s() -> None:
    head = b'event: response.created\ndata: {"type":"response.created","response":{"id": "resp_ab12","output":[]}}'
    assert response_id(head) == "resp_ab12"
    assert response_id(b'{"id":"resp_1","output":[{"id":"msg_2"}]}') == "resp_1"
    assert response_id(b'{"object":"response"') is None
