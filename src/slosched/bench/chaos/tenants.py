"""Chaos families ``tenants`` (isolation between API keys) and ``restart`` (SIGTERM with a job in flight).

Isolation: tenant B must see tenant A's job exactly as a missing one (404 on read, cancel, stage,
complete); a spoofed ``x-tenant`` must be refused (403) or ignored, never make B act as A; rotating
``x-tenant`` must not escape a key's rate limit; a claimed 1 ms deadline is clamped to the tenant's
``min_slo_s``; one tenant's idle jobs must not exhaust another's job capacity. Every cross-tenant act that
succeeds counts as an isolation violation.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from slosched.bench.chaos.bad_input import COMPLETIONS, JOBS, VALID
from slosched.bench.chaos.core import BAD_INPUT, OK, SHED, Ctx, Probe, gather_limited, send
from slosched.bench.chaos.faults import call, check_job_end, wait_job
from slosched.bench.chaos.setup import LIMITED_RPS, MAX_JOBS, MIN_SLO_S, TENANT_A, TENANT_B, TENANT_LIMITED, auth
from slosched.contract import HEADER_TENANT

A, B = auth(TENANT_A), auth(TENANT_B)
WORKFLOW = VALID[JOBS]


async def _create(
    client: httpx.AsyncClient, ctx: Ctx, probe: Probe, headers: dict[str, str], body: dict[str, Any] | None = None
) -> str | None:
    reply = await send(client, "POST", JOBS, ctx.bound_s, json_body=body or WORKFLOW, headers=headers)
    payload = reply.json()
    if probe.judge(reply, OK | SHED, "POST /v1/jobs") and reply.status == 201 and isinstance(payload, dict):
        return str(payload["id"])
    return None


async def _close(client: httpx.AsyncClient, ctx: Ctx, probe: Probe, job_id: str, headers: dict[str, str]) -> None:
    """Cancel a job with its owner's key; it must end (a job that cannot be read back is lost)."""
    probe.judge(await send(client, "DELETE", f"{JOBS}/{job_id}", ctx.bound_s, headers=headers), OK, "DELETE own job")
    check_job_end(probe, await wait_job(client, job_id, headers, ctx.bound_s), job_id)


async def _cross_tenant(ctx: Ctx, client: httpx.AsyncClient) -> None:
    probe = ctx.probe("tenants", "B reads/cancels/drives A's job")
    job_id = await _create(client, ctx, probe, A)
    if job_id is None:
        probe.fail("tenant A could not create a job")
        return
    if re.fullmatch(r"job-\d+", job_id):
        ctx.probe("tenants", "unguessable job ids").fail(f"job id {job_id!r} is a counter: guessable")
    else:
        ctx.probe("tenants", "unguessable job ids").sent += 1
    acts = (("GET", ""), ("POST", "/stages"), ("POST", "/complete"), ("DELETE", ""))
    for method, suffix in acts:
        body = VALID["/v1/jobs/{id}/stages"] if suffix == "/stages" else None
        reply = await send(client, method, f"{JOBS}/{job_id}{suffix}", ctx.bound_s, json_body=body, headers=B)
        probe.judge(reply, BAD_INPUT, f"B {method} A's job{suffix}")
        if reply.status is not None and reply.status < 400:
            probe.violation(f"B's {method} {suffix or '/'} on A's job answered {reply.status}")
        elif reply.status is not None and reply.status != 404:
            probe.fail(f"B's {method} on A's job answered {reply.status}, not 404 (reveals that it exists)")
    mine = await send(client, "GET", f"{JOBS}/{job_id}", ctx.bound_s, headers=A)
    state = mine.json().get("status") if isinstance(mine.json(), dict) else None
    if probe.judge(mine, OK, "A GET own job") and state != "running":
        probe.violation(f"A's job is {state!r} after B's attempts")
    await _close(client, ctx, probe, job_id, A)


async def _spoofed_tenant(ctx: Ctx, client: httpx.AsyncClient) -> None:
    probe = ctx.probe("tenants", "spoofed x-tenant")
    spoofed = {**B, HEADER_TENANT: TENANT_A}
    reply = await send(client, "POST", JOBS, ctx.bound_s, json_body={**WORKFLOW, "tenant": TENANT_A}, headers=spoofed)
    payload = reply.json()
    probe.judge(reply, OK | BAD_INPUT, "B POST /v1/jobs as acme")
    if reply.status != 201 or not isinstance(payload, dict):
        return  # refused (a 403 is the right answer)
    job_id = str(payload.get("id"))
    if payload.get("tenant") == TENANT_A:
        probe.violation("B's key created a job owned by tenant A")
    seen = await send(client, "GET", f"{JOBS}/{job_id}", ctx.bound_s, headers=A)
    if seen.status == 200:
        probe.violation("A can read the job B created with x-tenant: acme")
    await _close(client, ctx, probe, job_id, B)


async def _rotating_tenant(ctx: Ctx, client: httpx.AsyncClient) -> None:
    probe = ctx.probe("tenants", "rotating x-tenant vs a rate limit")
    count = 40
    started = time.monotonic()
    headers = [{**auth(TENANT_LIMITED), HEADER_TENANT: f"rot-{index}"} for index in range(count)]
    body = VALID[COMPLETIONS]
    replies = await gather_limited(
        (send(client, "POST", COMPLETIONS, ctx.bound_s, json_body=body, headers=h) for h in headers), 8
    )
    elapsed = time.monotonic() - started
    for reply in replies:
        probe.judge(reply, OK | SHED | BAD_INPUT, "rotating x-tenant call")
    through = sum(reply.status == 200 for reply in replies)
    allowed = max(LIMITED_RPS, 1.0) + LIMITED_RPS * elapsed + 1
    if through > allowed + 2:
        probe.violation(f"{through}/{count} calls in {elapsed:.1f} s past a {LIMITED_RPS:g} req/s limit")


async def _deadline_claim(ctx: Ctx, client: httpx.AsyncClient) -> None:
    probe = ctx.probe("tenants", "1 ms deadline claim")
    reply = await send(client, "POST", JOBS, ctx.bound_s, json_body={**WORKFLOW, "slo_s": 0.001}, headers=B)
    payload = reply.json()
    probe.judge(reply, OK | BAD_INPUT, "B POST /v1/jobs slo_s=0.001")
    if reply.status == 201 and isinstance(payload, dict):
        slo_s = payload.get("slo_s")
        if isinstance(slo_s, int | float) and slo_s < MIN_SLO_S:
            probe.violation(f"B's slo_s {slo_s} kept, below its min_slo_s {MIN_SLO_S}")
        await _close(client, ctx, probe, str(payload.get("id")), B)


async def _idle_jobs(ctx: Ctx, client: httpx.AsyncClient) -> None:
    probe = ctx.probe("tenants", "B's idle jobs vs A's capacity")
    held = [job for job in [await _create(client, ctx, probe, B) for _ in range(MAX_JOBS + 6)] if job]
    mine = await send(client, "POST", JOBS, ctx.bound_s, json_body=WORKFLOW, headers=A)
    probe.judge(mine, OK | SHED, "A POST /v1/jobs while B holds jobs")
    if mine.status != 201:
        probe.violation(f"A refused a job ({mine.status}) while B holds {len(held)} idle jobs")
    payload = mine.json()
    if mine.status == 201 and isinstance(payload, dict):
        held_by_a = [str(payload["id"])]
        await gather_limited((_close(client, ctx, probe, job, A) for job in held_by_a), 1)
    await gather_limited((_close(client, ctx, probe, job, B) for job in held), 8)


async def run_tenants(ctx: Ctx) -> None:
    async with ctx.client(limit=16) as client:
        probe = ctx.probe("tenants", "keys: unknown 401, x-api-key accepted")
        for headers, expect in (
            ({"authorization": "Bearer sk-nobody"}, BAD_INPUT),
            ({}, BAD_INPUT),
            ({"x-api-key": auth(TENANT_A)["authorization"][7:]}, OK),
        ):
            reply = await send(client, "POST", COMPLETIONS, ctx.bound_s, json_body=VALID[COMPLETIONS], headers=headers)
            probe.judge(reply, expect, f"call with {sorted(headers) or 'no key'}")
        for check in (_cross_tenant, _spoofed_tenant, _rotating_tenant, _deadline_claim, _idle_jobs):
            await check(ctx, client)


async def run_restart(ctx: Ctx, restart: Callable[[], Awaitable[float | None]]) -> None:
    """A relQuery in flight (rows held by the slow faulty backend), SIGTERM, start again on the same store:
    the job must be readable with its owner's key and end in a terminal state."""
    probe = ctx.probe("restart", "SIGTERM mid-relQuery, restart on the same store")
    await ctx.fault("slow_first_byte", 1.5)
    body = {"kind": "relquery", "template": "row {x}", "rows": [{"x": i} for i in range(30)], "slo_s": 120}
    async with ctx.client() as client:
        job_id = await _create(client, ctx, probe, A, body)
    await asyncio.sleep(0.5)
    took = await restart()  # ctx.url now names the new gateway
    await ctx.fault("none")
    if took is None:
        probe.hangs += 1
        probe.fail("the gateway did not exit on SIGTERM within its grace")
    if job_id is None:
        probe.fail("no relQuery job to follow")
        return
    async with ctx.client() as client:
        check_job_end(probe, await wait_job(client, job_id, A, ctx.bound_s * 2), job_id)
        await call(client, ctx, probe, 0, OK)
