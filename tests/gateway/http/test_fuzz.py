"""Malformed input gets a 4xx, never a 5xx (hypothesis over the request schema, bodies and headers)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.helpers import background_gateway

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
_fields = [
    "prompt",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "stream",
    "model",
    "vllm_xargs",
    "n",
    "kind",
    "slo_s",
    "rows",
    "template",
    "params",
    "calls",
    "name",
    "final",
    "priority",
    "tenant",
    "system",
    "input",
    "instructions",
    "max_output_tokens",
    "previous_response_id",
    "background",
]
_messages = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "role": _json | st.sampled_from(["user", "system"]),
            # Anthropic's typed blocks too (/v1/messages), with fields of any shape.
            "content": _json | st.lists(st.dictionaries(st.sampled_from(["type", "text", "content", "input"]), _json)),
        },
    ),
    max_size=3,
)
_body = st.dictionaries(st.sampled_from(_fields), _json | _messages, max_size=6)
_header_values = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12).map(str.strip)
_headers = st.dictionaries(
    st.sampled_from(["x-slo-deadline-ms", "x-slo-ttft-ms", "x-slo-tpot-ms", "x-tenant", "x-slo-priority"]),
    _header_values | st.sampled_from(["nan", "inf", "-1", "0", "1e12", "100", ""]),
    max_size=3,
)
_paths = st.sampled_from(
    ["/v1/completions", "/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/jobs", "/v1/jobs/job-0/stages"]
)


@pytest.fixture(scope="module")
def gateway(gateway_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway_url, timeout=10) as client:
        yield client


@pytest.fixture(scope="module")
def gateway_url() -> Iterator[str]:
    """Stub backends + gateway on a background event loop, shared by the fuzz examples."""
    # A trusted tenant header: the fuzzed x-tenant values reach the call path instead of stopping at 403.
    with background_gateway(backend={"max_concurrency": 64, "max_queue": 1024}, trust_tenant_header=True) as url:
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.post("/v1/jobs", json={"kind": "workflow"}).status_code == 201  # job-0 exists
        yield url


def _check(response: httpx.Response, sent: Any) -> None:
    assert response.status_code < 500, (sent, response.status_code, response.text)
    if response.status_code >= 400:
        assert "error" in response.json()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=_paths, body=_body, headers=_headers)
def test_structured_bodies_never_5xx(
    gateway_url: str, path: str, body: dict[str, Any], headers: dict[str, str]
) -> None:
    payload = json.dumps(body, allow_nan=True)
    with httpx.Client(base_url=gateway_url, timeout=10) as client:
        _check(client.post(path, content=payload, headers={"content-type": "application/json", **headers}), body)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=_paths, raw=st.binary(max_size=64) | _json.map(lambda v: json.dumps(v).encode()))
def test_raw_bodies_never_5xx(gateway: httpx.Client, path: str, raw: bytes) -> None:
    _check(gateway.post(path, content=raw), raw)
