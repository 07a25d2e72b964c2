"""vLLM's other JSON routes become one-token calls sized by their body, routed by their model."""

from __future__ import annotations

import math

import pytest

from slosched.gateway.calls.call import HttpError, SloHeaders
from slosched.gateway.calls.other_routes import GENERATION_PATHS, OTHER_ROUTES, parse_other_call

MODELS = {"tiny": 2048, "embedder": 512}


def test_a_body_becomes_a_one_token_call_of_its_size_with_the_headers_slo() -> None:
    body = {"model": "embedder", "input": ["a long passage " * 40, "another"]}
    slo = SloHeaders(deadline_ms=800.0, tenant="rag", priority=2.0, job_id="j1")
    call = parse_other_call("/v1/embeddings", body, slo, 10.0, MODELS, ("req-1", "client-1"))
    request = call.request
    assert (call.path, call.model, call.stream, call.body, call.request_id) == (
        "/v1/embeddings",
        "embedder",
        False,
        body,
        "client-1",
    )
    assert request.max_output_tokens == 1 and 150 < request.prompt_tokens < 200
    assert (request.deadline_s, request.tenant, request.priority, request.job_id) == (10.8, "rag", 2.0, "j1")
    assert request.template == request.stage == "/v1/embeddings"
    free = parse_other_call("/tokenize", {"prompt": "x"}, SloHeaders(), 0.0, MODELS)
    assert free.model is None and math.isinf(free.request.deadline_s)
    assert free.request.prompt_tokens == len(b'{"prompt":"x"}') // 4  # its JSON, four characters a token


@pytest.mark.parametrize(
    ("model", "status", "message"), [("nope", 404, "not served here"), (3, 400, "must be a string")]
)
def test_a_model_not_served_or_not_a_string_is_refused_naming_the_field(
    model: object, status: int, message: str
) -> None:
    with pytest.raises(HttpError) as caught:
        parse_other_call("/v1/score", {"model": model, "text_1": "a", "text_2": "b"}, SloHeaders(), 0.0, MODELS)
    assert (caught.value.status, caught.value.param) == (status, "model") and message in caught.value.message


def test_the_routes_are_vllm_s_json_routes_and_none_generates() -> None:
    assert not GENERATION_PATHS & set(OTHER_ROUTES)
    assert {"/v1/embeddings", "/tokenize", "/detokenize", "/v1/rerank", "/pooling"} <= set(OTHER_ROUTES)
