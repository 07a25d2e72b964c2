"""Chaos family ``input``: bad input on every route, each answered by a clear 4xx (never a 500, never a
2xx, never an echo of the input). Every request carries tenant A's valid key, and a control probe first
checks that the same routes accept a valid body with it (else every 401 would pass for a clear 4xx)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from slosched.bench.chaos.core import BAD_INPUT, OK, Ctx, Probe, gather_limited, send
from slosched.bench.chaos.setup import TENANT_A, auth

COMPLETIONS, CHAT, JOBS = "/v1/completions", "/v1/chat/completions", "/v1/jobs"
MESSAGES, RESPONSES = "/v1/messages", "/v1/responses"  # Anthropic's Messages API, OpenAI's Responses API
STAGES = "/v1/jobs/{id}/stages"
ROUTES = (COMPLETIONS, CHAT, MESSAGES, RESPONSES, JOBS, STAGES)
VALID: dict[str, dict[str, Any]] = {
    COMPLETIONS: {"model": "tiny", "prompt": "hello", "max_tokens": 4},
    CHAT: {"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4},
    MESSAGES: {"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4},
    RESPONSES: {"model": "tiny", "input": "hello", "max_output_tokens": 4},
    JOBS: {"kind": "workflow", "template": "chaos", "slo_s": 30},
    STAGES: {"name": "s", "calls": [{"prompt": "hello", "max_tokens": 4}]},
}
NUMBER_FIELD = {
    COMPLETIONS: "max_tokens",
    CHAT: "max_tokens",
    MESSAGES: "max_tokens",
    RESPONSES: "max_output_tokens",
    JOBS: "slo_s",
    STAGES: "max_tokens",
}
HUGE_INT = "1" + "0" * 4300  # 4,301 digits: past CPython's int-from-text limit
DEPTH = 100_000
Raw = tuple[str, bytes, dict[str, str]]  # method, body, extra headers
Case = Callable[[str], list[Raw]]


def _json(route: str, **changes: Any) -> bytes:
    body = json.loads(json.dumps(VALID[route]))
    target = body["calls"][0] if route == STAGES else body
    for name, value in changes.items():
        target[name] = value
    return json.dumps(body).encode()


def _raw_number(route: str, text: str) -> bytes:
    """The valid body with its number field's value replaced by raw JSON-ish ``text`` (NaN, 1e999...)."""
    marker = 987654321
    return _json(route, **{NUMBER_FIELD[route]: marker}).replace(str(marker).encode(), text.encode())


def _posts(*bodies: bytes) -> list[Raw]:
    return [("POST", body, {}) for body in bodies]


def _wrong_types(route: str) -> list[Raw]:
    if route == JOBS:
        return _posts(
            _json(route, kind=5),
            _json(route, slo_s="soon"),
            _json(route, kind="relquery", rows="x"),
            _json(route, template=["t"]),
        )
    if route == STAGES:
        return _posts(_json(route, prompt=5), _json(route, max_tokens="many"), json.dumps({"calls": "x"}).encode())
    field = {CHAT: "messages", MESSAGES: "messages", RESPONSES: "input"}.get(route, "prompt")
    return _posts(
        _json(route, **{field: 5}),
        _json(route, stream="yes"),
        _json(route, model=5),
        _json(route, **{NUMBER_FIELD[route]: "many"}),
        _json(route, **{field: {"a": 1}}),
    )


def _limits(route: str) -> list[Raw]:
    """n -1 / 1e8 and max_tokens 1e12 (for jobs: slo_s -1 / 0 and 20,001 rows; Anthropic's messages have no
    ``n``: max_tokens -1 and 5,000 messages instead)."""
    if route == MESSAGES:
        many = [{"role": "user", "content": "x"}] * 5_000
        return _posts(_json(route, max_tokens=-1), _json(route, messages=many), _json(route, max_tokens=10**12))
    if route == RESPONSES:  # no n either; a background response would run outside the queues: refused
        limits = (-1, 0, 10**12)
        return _posts(*(_json(route, max_output_tokens=limit) for limit in limits), _json(route, background=True))
    if route == JOBS:
        rows = [{"x": 1}] * 20_001
        return _posts(
            _json(route, slo_s=-1), _json(route, slo_s=0), _json(route, kind="relquery", template="{x}", rows=rows)
        )
    return _posts(
        _json(route, n=-1), _json(route, n=100_000_000), _json(route, max_tokens=10**12), _json(route, max_tokens=0)
    )


def _empty(route: str) -> list[Raw]:
    if route == JOBS:
        return _posts(_json(route, kind="relquery", template="", rows=[{"x": 1}]), _json(route, kind=""))
    if route == STAGES:
        return _posts(json.dumps({"calls": []}).encode(), _json(route, prompt=""))
    empties: dict[str, tuple[str, Any]] = {CHAT: ("messages", []), MESSAGES: ("messages", []), RESPONSES: ("input", [])}
    field, empty = empties.get(route, ("prompt", ""))
    return _posts(_json(route, **{field: empty}), b"", b"{}")


def _unknown_model(route: str) -> list[Raw]:
    if route == JOBS:
        return _posts(_json(route, kind="no-such-kind"))
    return _posts(_json(route, model="no-such-model"))


def _nesting(route: str) -> list[Raw]:
    deep = b"[" * DEPTH + b"]" * DEPTH
    return _posts(_raw_number(route, deep.decode()), deep, b"{" * DEPTH)


def _big_body(route: str) -> list[Raw]:
    return _posts(json.dumps({**VALID[route], "padding": "x" * 8_000_000}).encode())


def _bad_utf8(route: str) -> list[Raw]:
    return _posts(b'{"prompt": "\xff\xfe\xfd", "messages": "\xc3\x28", "kind": "\xa0\xa1"}', b"\xff" * 64)


def _content_type(route: str) -> list[Raw]:
    body = json.dumps(VALID[route]).encode()
    return [
        ("POST", body, {"content-type": "text/plain"}),
        ("POST", b"prompt=hi&max_tokens=4", {"content-type": "application/x-www-form-urlencoded"}),
    ]


def _not_object(route: str) -> list[Raw]:
    return _posts(b"[1, 2]", b"null", b'"text"', b"{not json", b'{"prompt": "x"')


def _methods(route: str) -> list[Raw]:
    return [("GET", b"", {}), ("PUT", _json(route), {}), ("DELETE", b"", {}), ("PATCH", _json(route), {})]


CASES: dict[str, Case] = {
    "wrong-types": _wrong_types,
    "huge-float-1e306": lambda route: _posts(_raw_number(route, "1e306"), _raw_number(route, "-1e306")),
    "int-10**400": lambda route: _posts(_raw_number(route, str(10**400))),
    "int-4301-digits": lambda route: _posts(_raw_number(route, HUGE_INT)),
    "inf-nan": lambda route: _posts(*(_raw_number(route, text) for text in ("NaN", "Infinity", "-Infinity", "1e999"))),
    "limits-n-max_tokens": _limits,
    "empty-prompt": _empty,
    "unknown-model": _unknown_model,
    "deep-nesting-100k": _nesting,
    "body-8mb": _big_body,
    "bad-utf8": _bad_utf8,
    "wrong-content-type": _content_type,
    "not-a-json-object": _not_object,
    "wrong-methods": _methods,
}


async def _open_job(client: httpx.AsyncClient, ctx: Ctx) -> str:
    """A fresh workflow job of tenant A (stage probes need a running one); "missing" when none opens."""
    reply = await send(client, "POST", JOBS, ctx.bound_s, json_body=VALID[JOBS], headers=auth(TENANT_A))
    payload = reply.json()
    return str(payload.get("id")) if reply.status == 201 and isinstance(payload, dict) else "missing"


async def _run_case(ctx: Ctx, client: httpx.AsyncClient, probe: Probe, case: Case) -> None:
    for route in ROUTES:
        path = route.replace("{id}", await _open_job(client, ctx)) if route == STAGES else route
        for method, body, extra in case(route):
            headers = {"content-type": "application/json", **auth(TENANT_A), **extra}
            reply = await send(client, method, path, ctx.bound_s, content=body or None, headers=headers)
            probe.judge(reply, BAD_INPUT, f"{method} {route} ({len(body):,} B)")


async def _control(ctx: Ctx, client: httpx.AsyncClient) -> None:
    probe = ctx.probe("input", "valid-control")
    for route in ROUTES:
        path = route.replace("{id}", await _open_job(client, ctx)) if route == STAGES else route
        reply = await send(client, "POST", path, ctx.bound_s, json_body=VALID[route], headers=auth(TENANT_A))
        probe.judge(reply, OK, f"valid POST {route}")


async def _other_routes(ctx: Ctx, client: httpx.AsyncClient) -> None:
    """Wrong methods on the read-only routes; hostile job ids."""
    probe = ctx.probe("input", "read-routes-wrong-methods")
    for path in ("/v1/models", "/metrics", "/health"):
        for method in ("POST", "PUT", "DELETE"):
            reply = await send(client, method, path, ctx.bound_s, content=b"{}", headers=auth(TENANT_A))
            probe.judge(reply, BAD_INPUT, f"{method} {path}")
    probe = ctx.probe("input", "hostile-job-ids")
    for job_id in ("x" * 10_000, "..%2F..%2Fetc%2Fpasswd", "%00", "j%C3%B6b-%E2%9C%93", "job-" + "9" * 400):
        for method, suffix in (("GET", ""), ("DELETE", ""), ("POST", "/stages"), ("POST", "/complete")):
            reply = await send(
                client, method, f"{JOBS}/{job_id}{suffix}", ctx.bound_s, json_body={}, headers=auth(TENANT_A)
            )
            probe.judge(reply, BAD_INPUT, f"{method} /v1/jobs/<{len(job_id)} chars>{suffix}")
        for method, suffix in (("GET", ""), ("POST", "/cancel"), ("DELETE", "")):  # stored responses: none is theirs
            path = f"{RESPONSES}/{job_id}{suffix}"
            reply = await send(client, method, path, ctx.bound_s, json_body={}, headers=auth(TENANT_A))
            probe.judge(reply, BAD_INPUT, f"{method} /v1/responses/<{len(job_id)} chars>{suffix}")


async def run_input(ctx: Ctx) -> None:
    async with ctx.client(limit=8) as client:
        await _control(ctx, client)
        cases = [(ctx.probe("input", name), case) for name, case in CASES.items()]
        await gather_limited((_run_case(ctx, client, probe, case) for probe, case in cases), 4)
        await _other_routes(ctx, client)
