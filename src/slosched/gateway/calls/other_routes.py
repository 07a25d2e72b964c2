"""vLLM's other JSON routes: embeddings, pooling, scoring, reranking, (de)tokenizing and Anthropic's token
count, forwarded whole.

A production gateway in front of vLLM is asked more than completions: a RAG application embeds and reranks
through the same endpoint it generates from (proxies in front of vLLM commonly pass these routes on). They
generate nothing, so the gateway schedules them as one-token calls sized by their body (about four
characters a token, as a prompt is estimated), routed over the backends that serve the body's ``model`` by
the same router, queues, tenant limits, retries and SLO headers as any call, and answered with the backend's
response as it is. They are never streamed, and a finished one teaches no belief (``GENERATION_PATHS``): its
latency says nothing about a generation's. The picker builds its requests for these routes here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from slosched.core.deadline import absolute_deadline_s
from slosched.core.request import Request
from slosched.gateway.calls.call import (
    CHAT,
    COMPLETIONS,
    Call,
    SloHeaders,
    bad_request,
    model_not_found,
    next_request_id,
)
from slosched.gateway.calls.messages import COUNT_TOKENS, MESSAGES
from slosched.gateway.calls.prompt_blocks import CHARS_PER_TOKEN
from slosched.gateway.calls.responses import RESPONSES

GENERATION_PATHS = frozenset((CHAT, COMPLETIONS, MESSAGES, RESPONSES))
OTHER_ROUTES = (
    "/v1/embeddings",
    "/pooling",
    "/classify",
    "/score",
    "/v1/score",
    "/rerank",
    "/v1/rerank",
    "/v2/rerank",
    "/tokenize",
    "/detokenize",
    COUNT_TOKENS,
)
# The gateway's scheduling fields a route's vLLM request model does not read (vLLM logs a warning for each
# such field, per request, so they are not sent): the plugin's ``vllm_xargs`` reach it only through sampling
# parameters, which generations alone carry; pooling and scoring requests take ``priority``; (de)tokenizing
# is never scheduled by the engine, so it takes neither; Anthropic's Messages request has no ``priority``.
WITHOUT_XARGS = frozenset(OTHER_ROUTES)
WITHOUT_PRIORITY = frozenset(("/tokenize", "/detokenize", COUNT_TOKENS, MESSAGES))


def body_model(body: Mapping[str, Any], models: Mapping[str, int] | None) -> str | None:
    """The body's ``model`` (None: any served model): 400 when it is not a string, 404 when not served."""
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad_request("model", f"must be a string, got {type(model).__name__}")
    if model is not None and models is not None and model not in models:
        raise model_not_found(model, models)
    return model


def bare_request(slo: SloHeaders, now_s: float, prompt_tokens: int, template: str, request_id: str) -> Request:
    """A one-token request of ``prompt_tokens``, with the deadline, tenant and priority the headers give."""
    return Request(
        id=request_id,
        job_id=slo.job_id or request_id,
        stage=slo.stage or template,
        template=template,
        prompt_tokens=max(prompt_tokens, 1),
        max_output_tokens=1,
        arrival_s=now_s,
        job_arrival_s=now_s,
        deadline_s=absolute_deadline_s(now_s, None if slo.deadline_ms is None else slo.deadline_ms / 1000.0),
        tenant=slo.tenant,
        priority=slo.priority,
        session_id=slo.program_id,
    )


def parse_other_call(
    path: str,
    body: dict[str, Any],
    slo: SloHeaders,
    now_s: float,
    models: Mapping[str, int] | None = None,
    ids: tuple[str, str | None] | None = None,
) -> Call:
    """The call of a body to one of ``OTHER_ROUTES`` (``ids`` as ``parse_call`` takes them)."""
    model = body_model(body, models)
    request_id, client_id = (next_request_id(), None) if ids is None else ids
    prompt_tokens = _json_size(body) // CHARS_PER_TOKEN
    request = bare_request(slo, now_s, prompt_tokens, path, request_id)
    return Call(path, body, False, request, model=model, client_id=client_id)


def _json_size(body: dict[str, Any]) -> int:
    """The body's size as JSON (orjson refuses integers past 64 bits: those count by their digits)."""
    try:
        return len(orjson.dumps(body))
    except TypeError:
        return len(repr(body))
