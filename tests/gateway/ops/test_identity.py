"""Identity from the operator (``gateway.ops.identity``): keys map to tenants, the client's ``x-tenant`` and SLO
headers are held to what the operator allows, and per-tenant limits hold however the client rotates its
headers. Config validation, ``resolve``, the hot path (faked backend side) and a real gateway on stubs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.core.request import Outcome
from slosched.gateway.calls.call import Call, HttpError, SloHeaders
from slosched.gateway.http.hotpath import OpenAIRoutes
from slosched.gateway.ops.config import parse_config
from slosched.gateway.ops.identity import Identities, Principal, scoped
from tests.gateway.helpers import harness
from tests.gateway.http.test_hotpath import _streaming, make_routes, outcomes, request, status_and_json

BACKENDS = [{"name": "b0", "url": "http://127.0.0.1:9"}]
TENANTS = {
    "acme": {"api_keys": ["sk-acme"], "priority": 1, "min_slo_s": 2.0, "rate_limit_rps": 2, "max_jobs": 5},
    "proxy": {"api_keys": ["sk-proxy"], "act_as": ["acme"]},
    "root": {"api_keys": ["sk-root"], "act_as": ["*"]},
}


def identities(**overrides: Any) -> Identities:
    return Identities.from_config(parse_config({"backends": BACKENDS, **overrides}))


def bearer(key: str, **extra: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}", **extra}


# --- config ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tenants", "legacy", "field", "words"),
    [
        ({"a": {"api_keys": ["k"]}, "b": {"api_keys": ["k"]}}, [], "tenants", "tenants.b.api_keys[0]"),
        ({"a": {"api_keys": ["k", "k"]}}, [], "tenants", "tenants.a.api_keys[1]"),
        ({"a": {"api_keys": ["k"]}}, ["k"], "tenants", "already api_keys[0]"),
        ({"a": {"min_slo_s": -1}}, [], "tenants.a.min_slo_s", "greater than 0"),
        ({"a": {"max_concurrency": 0}}, [], "tenants.a.max_concurrency", "greater than or equal to 1"),
        ({"a": {"rate_limit": 1}}, [], "tenants.a.rate_limit", "unknown key 'rate_limit' (did you mean"),
        ({"*": {}}, [], "tenants.*.[key]", "pattern"),
    ],
)
def test_bad_tenants_name_the_field_and_never_echo_a_key(
    tenants: dict[str, Any], legacy: list[str], field: str, words: str
) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config({"backends": BACKENDS, "tenants": tenants, "api_keys": legacy})
    assert error.value.field == field and words in str(error.value)
    assert "'k'" not in str(error.value)


# --- resolve ---------------------------------------------------------------------------------------------


def test_a_key_is_its_tenant_with_the_operators_class_and_limits() -> None:
    ids = identities(tenants=TENANTS)
    acme = ids.resolve(bearer("sk-acme"))
    assert acme == Principal("acme", priority=1.0, min_slo_s=2.0, max_jobs=5, rate_limit_rps=2.0)
    assert ids.resolve({"x-api-key": "sk-acme"}) == acme
    assert ids.resolve(bearer("sk-acme", **{"x-tenant": "acme"})) == acme  # naming itself is fine


@pytest.mark.parametrize("headers", [{}, bearer("sk-nope"), bearer(""), {"authorization": "Basic sk-acme"}])
def test_a_missing_or_unknown_key_is_401(headers: dict[str, str]) -> None:
    with pytest.raises(HttpError) as error:
        identities(tenants=TENANTS).resolve(headers)
    assert (error.value.status, error.value.code) == (401, "unauthorized")


@pytest.mark.parametrize(
    ("key", "asked", "allowed"),
    [
        ("sk-acme", "root", False),  # a spoofed tenant
        ("sk-acme", "default", False),
        ("sk-proxy", "acme", True),  # act_as names it
        ("sk-proxy", "root", False),
        ("sk-root", "anyone", True),  # act_as "*"
    ],
)
def test_x_tenant_naming_another_tenant_needs_act_as(key: str, asked: str, allowed: bool) -> None:
    ids = identities(tenants=TENANTS, trust_tenant_header=True)  # trust covers tenantless callers only
    if allowed:
        assert ids.resolve(bearer(key, **{"x-tenant": asked})).tenant == asked
        return
    with pytest.raises(HttpError) as error:
        ids.resolve(bearer(key, **{"x-tenant": asked}))
    assert (error.value.status, error.value.code) == (403, "forbidden") and asked in error.value.message


def test_acting_as_a_configured_tenant_takes_its_class_and_limits() -> None:
    ids = identities(tenants=TENANTS)
    assert ids.resolve(bearer("sk-proxy", **{"x-tenant": "acme"})) == ids.resolve(bearer("sk-acme"))


def test_open_mode_is_tenant_default_unless_the_header_is_trusted() -> None:
    ids = identities(default_rate_limit=3.0, tenant_rate_limits={"gold": 9.0})
    assert ids.open and ids.resolve({}) == Principal("default", rate_limit_rps=3.0)
    with pytest.raises(HttpError) as error:
        ids.resolve({"x-tenant": "gold"})
    assert error.value.status == 403
    trusted = identities(default_rate_limit=3.0, tenant_rate_limits={"gold": 9.0}, trust_tenant_header=True)
    assert trusted.resolve({"x-tenant": "gold"}) == Principal("gold", rate_limit_rps=9.0)
    assert trusted.resolve({"x-tenant": "other"}) == Principal("other", rate_limit_rps=3.0)
    with pytest.raises(HttpError) as error:
        trusted.resolve({"x-tenant": "x" * 129})
    assert (error.value.status, len(error.value.message) < 100) == (400, True)


def test_legacy_api_keys_are_tenant_default() -> None:
    ids = identities(api_keys=["legacy"], tenants=TENANTS)
    assert ids.resolve(bearer("legacy")).tenant == "default"
    assert ids.resolve(bearer("sk-acme")).tenant == "acme"
    with pytest.raises(HttpError):
        ids.resolve(bearer("legacy", **{"x-tenant": "acme"}))
    trusted = identities(api_keys=["legacy"], trust_tenant_header=True)
    assert trusted.resolve(bearer("legacy", **{"x-tenant": "small"})).tenant == "small"


# --- SLO headers within the operator's floors ------------------------------------------------------------


def _loosened(asked_ms: float | None, floor_s: float | None) -> float | None:
    return None if asked_ms is None else max(asked_ms, (floor_s or 0.0) * 1000.0)


@given(
    asked_priority=st.floats(-100, 100),
    deadline_ms=st.none() | st.floats(0.001, 1e6),
    floor_priority=st.floats(-10, 10),
    min_slo_s=st.none() | st.floats(0.01, 100),
    ttft_ms=st.none() | st.floats(0.001, 1e5),
    min_ttft_slo_s=st.none() | st.floats(0.01, 10),
    tpot_ms=st.none() | st.floats(0.001, 1e4),
    min_tpot_slo_s=st.none() | st.floats(0.001, 1),
)
def test_scoped_headers_only_ever_lower_priority_and_loosen_deadlines(
    asked_priority: float,
    deadline_ms: float | None,
    floor_priority: float,
    min_slo_s: float | None,
    ttft_ms: float | None,
    min_ttft_slo_s: float | None,
    tpot_ms: float | None,
    min_tpot_slo_s: float | None,
) -> None:
    slo = SloHeaders(deadline_ms=deadline_ms, ttft_ms=ttft_ms, tpot_ms=tpot_ms, tenant="spoof", priority=asked_priority)
    principal = Principal(
        "acme", floor_priority, min_slo_s, min_ttft_slo_s=min_ttft_slo_s, min_tpot_slo_s=min_tpot_slo_s
    )
    out = scoped(slo, principal)
    assert out.tenant == "acme"
    assert out.priority == max(asked_priority, floor_priority)
    assert out.deadline_ms == _loosened(deadline_ms, min_slo_s)
    assert out.ttft_ms == _loosened(ttft_ms, min_ttft_slo_s)
    assert out.tpot_ms == _loosened(tpot_ms, min_tpot_slo_s)


def _recording(routes: OpenAIRoutes) -> list[Call]:
    seen: list[Call] = []

    async def complete(call: Call) -> tuple[int, bytes]:
        seen.append(call)
        routes.dispatcher.finish(call, Outcome.COMPLETED, "ok")
        return 200, b"{}"

    routes.dispatcher.complete = complete  # type: ignore[method-assign]
    return seen


def test_a_call_is_scheduled_as_its_principal_with_the_tenants_floors() -> None:
    routes = make_routes(tenants=TENANTS)
    seen = _recording(routes)
    greedy = [(b"authorization", b"Bearer sk-acme"), (b"x-slo-deadline-ms", b"1"), (b"x-slo-priority", b"-50")]
    assert status_and_json(request(routes, headers=greedy))[0] == 200
    honest = [(b"authorization", b"Bearer sk-acme"), (b"x-slo-deadline-ms", b"9000"), (b"x-slo-priority", b"3")]
    assert status_and_json(request(routes, headers=honest))[0] == 200
    (claimed, asked) = (seen[0].request, seen[1].request)
    assert (claimed.tenant, claimed.priority, claimed.deadline_s - claimed.arrival_s) == ("acme", 1.0, 2.0)
    assert (asked.priority, asked.deadline_s - asked.arrival_s) == (3.0, 9.0)  # looser asks stand


def test_a_tenants_token_latency_floors_apply_to_calls() -> None:
    tenants = {"acme": {"api_keys": ["sk-acme"], "min_ttft_slo_s": 0.5, "min_tpot_slo_s": 0.05}}
    routes = make_routes(tenants=tenants)
    seen = _recording(routes)
    greedy = [(b"authorization", b"Bearer sk-acme"), (b"x-slo-ttft-ms", b"1"), (b"x-slo-tpot-ms", b"1")]
    assert status_and_json(request(routes, headers=greedy))[0] == 200
    honest = [(b"authorization", b"Bearer sk-acme"), (b"x-slo-ttft-ms", b"2000"), (b"x-slo-tpot-ms", b"80")]
    assert status_and_json(request(routes, headers=honest))[0] == 200
    (claimed, asked) = (seen[0].request, seen[1].request)
    assert (claimed.ttft_slo_s, claimed.tpot_slo_s) == (0.5, 0.05)
    assert (asked.ttft_slo_s, asked.tpot_slo_s) == (2.0, 0.08)


# --- limits on the hot path ------------------------------------------------------------------------------

_OUTCOMES = [
    "ok",
    "backend_4xx",
    "queue_full",
    "no_backend",
    "backend_failed",
    "bug",
    "cancelled",
    "bad_body",
    "stream_ok",
    "stream_gone",
]
_ERRORS = {
    "queue_full": HttpError(429, "queue_full", "full", 1.0),
    "no_backend": HttpError(503, "no_backend", "x"),
    "backend_failed": HttpError(502, "backend_failed", "x"),
    "bug": RuntimeError("bug"),
}


def _one_call(routes: OpenAIRoutes, kind: str, during: list[int]) -> None:
    headers = [(b"authorization", b"Bearer sk-one")]
    limits = routes.access.limits
    if kind.startswith("stream"):
        _streaming(routes, hang=kind == "stream_gone")
        gone = {"type": "http.disconnect"} if kind == "stream_gone" else None
        request(routes, body=json.dumps({"prompt": "x", "stream": True}).encode(), headers=headers, then=gone)
        return

    async def complete(call: Call) -> tuple[int, bytes]:
        during.append(limits.in_flight("one"))
        if kind == "cancelled":
            raise asyncio.CancelledError
        if kind in _ERRORS:
            raise _ERRORS[kind]
        routes.dispatcher.finish(call, Outcome.COMPLETED if kind == "ok" else Outcome.FAILED, kind)
        return 200 if kind == "ok" else 400, b"{}"

    routes.dispatcher.complete = complete  # type: ignore[method-assign]
    body = b"{" if kind == "bad_body" else json.dumps({"prompt": "x", "max_tokens": 2}).encode()
    try:
        sent = request(routes, body=body, headers=headers)
    except asyncio.CancelledError:
        return
    assert status_and_json(sent)[2].get("error", {}).get("type") != "concurrency_limited"


@settings(max_examples=40, deadline=None)
@given(kinds=st.lists(st.sampled_from(_OUTCOMES), min_size=1, max_size=12))
def test_the_concurrency_slot_is_released_once_whatever_the_outcome(kinds: list[str]) -> None:
    routes = make_routes(tenants={"one": {"api_keys": ["sk-one"], "max_concurrency": 1}})
    during: list[int] = []
    for kind in kinds:
        _one_call(routes, kind, during)
        assert routes.access.limits.in_flight("one") == 0  # a leak would also 429 the next call
    assert all(count == 1 for count in during)
    accepted = sum(kind != "bad_body" for kind in kinds)
    assert sum(outcomes(routes).values()) == accepted  # every accepted call ended exactly once


def test_a_second_call_in_flight_is_concurrency_limited() -> None:
    routes = make_routes(tenants={"one": {"api_keys": ["sk-one"], "max_concurrency": 1}})
    answers: list[tuple[int, str, str | None]] = []

    async def complete(call: Call) -> tuple[int, bytes]:
        sent = await _inner(routes)
        status, headers, payload = status_and_json(sent)
        answers.append((status, payload["error"]["type"], headers.get("retry-after")))
        routes.dispatcher.finish(call, Outcome.COMPLETED, "ok")
        return 200, b"{}"

    routes.dispatcher.complete = complete  # type: ignore[method-assign]
    assert status_and_json(request(routes, headers=[(b"x-api-key", b"sk-one")]))[0] == 200
    assert answers == [(429, "concurrency_limited", "1")]


async def _inner(routes: OpenAIRoutes) -> list[MutableMapping[str, Any]]:
    sent: list[MutableMapping[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b'{"prompt": "y"}', "more_body": False}

    scope = {"type": "http", "method": "POST", "headers": [(b"x-api-key", b"sk-one")]}
    await routes(scope, receive, send, "/v1/completions")
    return sent


# --- a real gateway on stubs -----------------------------------------------------------------------------


def test_rotating_x_tenant_no_longer_bypasses_the_rate_limit() -> None:
    """The probe of issue 16: 30 calls, each naming a fresh x-tenant, used to pass 30/30."""
    body = {"prompt": "p", "max_tokens": 1}

    async def probe(client: httpx.AsyncClient, headers: dict[str, str]) -> tuple[int, int]:
        statuses = []
        for index in range(30):
            rotated = {**headers, "x-tenant": f"t{index}"}
            statuses.append((await client.post("/v1/completions", json=body, headers=rotated)).status_code)
        assert set(statuses) == {403}  # naming a tenant one is not: refused, and no bucket of its own
        passed = 0
        for _ in range(30):
            passed += (await client.post("/v1/completions", json=body, headers=headers)).status_code == 200
        return statuses.count(200), passed

    async def scenario() -> list[tuple[int, int]]:
        overrides: dict[str, Any] = {"tenants": TENANTS, "api_keys": ["legacy"], "default_rate_limit": 2.0}
        async with harness(**overrides) as h, httpx.AsyncClient(base_url=h.url) as client:
            keyed = await probe(client, bearer("sk-acme"))  # acme: rate_limit_rps 2
            legacy = await probe(client, bearer("legacy"))  # tenant "default": default_rate_limit 2
        async with harness(default_rate_limit=2.0) as h, httpx.AsyncClient(base_url=h.url) as client:
            anonymous = await probe(client, {})
            assert h.value("slosched:admission_rejections_total", reason="rate_limited") >= 20
        return [keyed, legacy, anonymous]

    for rotated, plain in asyncio.run(scenario()):
        assert rotated == 0 and 2 <= plain <= 5  # the burst (2) plus what refills during the probe


def test_job_api_requests_count_against_the_request_rate() -> None:
    async def scenario() -> None:
        tenants = {"acme": {"api_keys": ["sk-acme"], "rate_limit_rps": 0.1}}
        async with harness(tenants=tenants) as h, httpx.AsyncClient(base_url=h.url) as client:
            assert (await client.get("/v1/models", headers=bearer("sk-acme"))).status_code == 200
            limited = await client.get("/v1/jobs/job-x", headers=bearer("sk-acme"))
            assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 9
            limited = await client.post("/v1/completions", json={"prompt": "p"}, headers=bearer("sk-acme"))
            assert limited.status_code == 429
            assert (await client.get("/v1/models")).status_code == 401
            assert h.value("slosched:admission_rejections_total", reason="rate_limited") == 2

    asyncio.run(scenario())


def test_a_replaced_identities_takes_effect_at_once() -> None:
    async def scenario() -> None:
        async with harness() as h, httpx.AsyncClient(base_url=h.url) as client:
            body = {"prompt": "p", "max_tokens": 1}
            assert (await client.post("/v1/completions", json=body)).status_code == 200
            h.gateway.identities = identities(api_keys=["new"])  # what a config reload does
            assert (await client.post("/v1/completions", json=body)).status_code == 401
            assert (await client.get("/v1/models")).status_code == 401
            assert (await client.post("/v1/completions", json=body, headers=bearer("new"))).status_code == 200

    asyncio.run(scenario())


def test_jobs_belong_to_the_principal() -> None:
    tenants = {"acme": {"api_keys": ["sk-acme"]}, "root": {"api_keys": ["sk-root"]}}

    async def scenario() -> None:
        async with harness(tenants=tenants) as h, httpx.AsyncClient(base_url=h.url) as client:
            spoofed = {"kind": "workflow", "slo_s": 30, "tenant": "root"}
            assert (await client.post("/v1/jobs", json=spoofed, headers=bearer("sk-acme"))).status_code == 403
            body = {"kind": "workflow", "slo_s": 30}
            created = await client.post("/v1/jobs", json=body, headers=bearer("sk-acme"))
            assert created.status_code == 201 and created.json()["tenant"] == "acme"
            job_id = created.json()["id"]
            assert (await client.get(f"/v1/jobs/{job_id}", headers=bearer("sk-acme"))).status_code == 200
            other = await client.get(f"/v1/jobs/{job_id}", headers=bearer("sk-root"))
            missing = await client.get("/v1/jobs/job-missing", headers=bearer("sk-root"))
            assert other.status_code == missing.status_code == 404
            assert other.json()["error"]["message"].replace(job_id, "ID") == missing.json()["error"]["message"].replace(
                "job-missing", "ID"
            )
            assert (await client.delete(f"/v1/jobs/{job_id}", headers=bearer("sk-root"))).status_code == 404
            assert (await client.delete(f"/v1/jobs/{job_id}", headers=bearer("sk-acme"))).status_code == 200

    asyncio.run(scenario())
