"""Chaos family ``fuzz``: seeded random bodies and headers, thousands of them (cheap: the stub answers at
once). A valid body gets one to three mutations (a field set to a random value of a random type, a field
dropped, the bytes truncated or flipped); headers get junk SLO values, tenants and keys. Every reply must
be a 2xx, a clear 4xx or a shed with Retry-After: never a 500, a traceback or a hang.

Deterministic by seed (``random.Random``; hypothesis's ``.example()`` is not seedable).
"""

from __future__ import annotations

import json
import random
from typing import Any

import httpx

from slosched.bench.chaos.bad_input import CHAT, COMPLETIONS, JOBS, VALID
from slosched.bench.chaos.core import BAD_INPUT, OK, SHED, Ctx, Probe, gather_limited, send
from slosched.bench.chaos.setup import KEYS, TENANT_A, auth
from slosched.contract import HEADER_DEADLINE_MS, HEADER_PRIORITY, HEADER_TENANT, HEADER_TPOT_MS, HEADER_TTFT_MS

ANY = OK | BAD_INPUT | SHED
FIELDS = (
    "prompt",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "n",
    "stream",
    "model",
    "temperature",
    "top_p",
    "stop",
    "logprobs",
    "kind",
    "slo_s",
    "rows",
    "template",
    "priority",
    "params",
    "tenant",
)
JUNK_HEADER_VALUES = ("", "0", "-1", "1e400", "nan", "inf", "soon", "1" * 5000, "%31%32", "0x10", "1e-300")
SLO_HEADER_NAMES = (HEADER_DEADLINE_MS, HEADER_TTFT_MS, HEADER_TPOT_MS, HEADER_PRIORITY, HEADER_TENANT)
CONCURRENCY = 32


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(12 if depth < 3 else 8)
    if kind == 0:
        return rng.choice([0, 1, -1, 2**31, 2**63, -(2**63) - 1, 10**30, rng.randrange(-1000, 5000)])
    if kind == 1:
        return rng.choice([0.5, -0.0, 1e-300, 1e306, -1e306, 3.5e38, rng.uniform(-10, 10)])
    if kind == 2:
        return rng.choice([True, False, None])
    if kind in (3, 4):
        alphabet = "abc {}\\\"'\n\t\u00e9\u4e2d\U0001f600\u202e\x00"
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
    if kind == 5:
        return "{" + rng.choice(["x", "y", "__class__", "0", ""]) + "}"
    if kind == 6:
        return "x" * rng.choice([0, 1, 5000, 100_000])
    if kind == 7:
        return rng.choice(["workflow", "relquery", "tiny", "user", "assistant"])
    if kind in (8, 9):
        return [_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    return {rng.choice((*FIELDS, "role", "content", "x")): _value(rng, depth + 1) for _ in range(rng.randrange(0, 4))}


def _mutate(rng: random.Random, body: dict[str, Any]) -> bytes:
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(10)
        if op < 7:
            body[rng.choice(FIELDS)] = _value(rng)
        elif op < 9 and body:
            body.pop(rng.choice(sorted(body)))
        else:
            body = {"wrapped": body}
    raw = json.dumps(body).encode()
    if rng.random() < 0.1:
        cut = rng.randrange(len(raw) + 1)
        raw = raw[:cut] if rng.random() < 0.5 else raw[:cut] + bytes([rng.randrange(256)]) + raw[cut + 1 :]
    return raw


def _headers(rng: random.Random) -> dict[str, str]:
    roll = rng.random()
    if roll < 0.05:
        headers: dict[str, str] = {}  # no key: a clear 401
    elif roll < 0.1:
        headers = {"authorization": rng.choice(["Bearer", "Bearer sk-wrong", "Basic Zm9vOmJhcg==", "x" * 3000])}
    else:
        headers = auth(rng.choice(sorted(KEYS)))
    if rng.random() < 0.4:
        for name in rng.sample(SLO_HEADER_NAMES, rng.randrange(1, 3)):
            headers[name] = rng.choice((*JUNK_HEADER_VALUES, "2000", "500", "acme", "globex"))
    return {**headers, "content-type": "application/json"}


def requests(seed: int, count: int, route: str) -> list[tuple[bytes, dict[str, str]]]:
    """``count`` fuzzed (body, headers) pairs for ``route``, the same for the same seed."""
    rng = random.Random(f"chaos-fuzz/{seed}/{route}")
    return [(_mutate(rng, json.loads(json.dumps(VALID[route]))), _headers(rng)) for _ in range(count)]


async def _one(
    client: httpx.AsyncClient, ctx: Ctx, probe: Probe, route: str, body: bytes, headers: dict[str, str]
) -> None:
    reply = await send(client, "POST", route, ctx.bound_s, content=body, headers=headers)
    probe.judge(reply, ANY, f"fuzz POST {route} {body[:48]!r}")


async def _bad_slo_headers(ctx: Ctx, client: httpx.AsyncClient) -> None:
    """Each SLO header with each junk value on a valid call: a clear 400 (a few are valid: 2xx)."""
    probe = ctx.probe("fuzz", "junk-slo-headers")
    body = json.dumps(VALID[COMPLETIONS]).encode()
    coroutines = []
    for name in SLO_HEADER_NAMES:
        for value in JUNK_HEADER_VALUES:
            headers = {**auth(TENANT_A), "content-type": "application/json", name: value}
            coroutines.append(_one(client, ctx, probe, COMPLETIONS, body, headers))
    await gather_limited(coroutines, 8)


async def run_fuzz(ctx: Ctx, seed: int) -> None:
    shares = {COMPLETIONS: 0.5, CHAT: 0.3, JOBS: 0.2}
    async with ctx.client(limit=CONCURRENCY) as client:
        await _bad_slo_headers(ctx, client)
        for route, share in shares.items():
            probe = ctx.probe("fuzz", f"bodies-headers {route}")
            pairs = requests(seed, ctx.count(int(18_000 * share)), route)
            await gather_limited((_one(client, ctx, probe, route, b, h) for b, h in pairs), CONCURRENCY)
