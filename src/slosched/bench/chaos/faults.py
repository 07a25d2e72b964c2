"""Chaos families ``backend`` (the faulty backend's faults, one at a time), ``overload`` (a burst far above
the backends' windows and queues) and ``slow-clients`` (half-sent headers and bodies, idle sockets, a
stream nobody reads).

Under a backend fault every call must end within its bound, either answered through the healthy backend
(a 2xx with a valid body) or refused with a clear 502/503/504; a job running meanwhile must end. Under
overload the gateway sheds with 429/503 and ``Retry-After``. A slow client's socket must be closed by the
gateway within its limits while a real request still goes through.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from urllib.parse import urlsplit

import httpx

from slosched.bench.chaos.bad_input import CHAT, COMPLETIONS, JOBS, VALID
from slosched.bench.chaos.core import FAULT, OK, SHED, Ctx, Probe, Reply, gather_limited, send
from slosched.bench.chaos.setup import TENANT_A, auth

TERMINAL_JOB = ("completed", "failed", "cancelled")
FAULTS = (
    ("error500", None),
    ("hang", None),
    ("invalid", None),
    ("reset", None),
    ("slow_stream", 0.3),
    ("slow_first_byte", 3.0),
)
SLOW_CLIENT_BOUND_S = 20.0  # the gateway's header/body/idle limits must close a socket sooner


async def wait_job(client: httpx.AsyncClient, job_id: str, headers: dict[str, str], bound_s: float) -> Reply:
    """Poll a job until it is terminal or ``bound_s`` passes; the last reply (None status: never read)."""
    deadline = time.monotonic() + bound_s
    reply = Reply(None, timed_out=True)
    while time.monotonic() < deadline:
        reply = await send(client, "GET", f"{JOBS}/{job_id}", bound_s, headers=headers)
        payload = reply.json()
        if reply.status != 200 or (isinstance(payload, dict) and payload.get("status") in TERMINAL_JOB):
            return reply
        await asyncio.sleep(0.2)
    return reply


def check_job_end(probe: Probe, reply: Reply, job_id: str) -> None:
    """Count a job that never reached a terminal state (gone, or still running past its bound) as lost."""
    payload = reply.json()
    status = payload.get("status") if isinstance(payload, dict) else None
    if status not in TERMINAL_JOB:
        probe.lost += 1
        probe.fail(f"job {job_id[:24]} never ended: {reply.status} status={status!r}")


def _valid_body(reply: Reply, stream: bool) -> bool:
    if stream:
        return reply.body.rstrip().endswith(b"data: [DONE]")
    payload = reply.json()
    return isinstance(payload, dict) and isinstance(payload.get("choices"), list)


async def call(client: httpx.AsyncClient, ctx: Ctx, probe: Probe, index: int, expect: frozenset[str]) -> None:
    """One valid call (plain, streamed or chat by ``index``); a 2xx must carry a complete body."""
    route, stream = ((COMPLETIONS, False), (COMPLETIONS, True), (CHAT, False))[index % 3]
    body = {**VALID[route], "stream": stream}
    reply = await send(client, "POST", route, ctx.bound_s, json_body=body, headers=auth(TENANT_A))
    judged = probe.judge(reply, expect, f"POST {route} stream={stream}")
    if judged and reply.status == 200 and not _valid_body(reply, stream):
        probe.lost += 1  # delivered as a success, but the client has no answer
        probe.fail(f"POST {route}: 200 with an invalid body {reply.body[:40]!r}")


async def _under_fault(ctx: Ctx, client: httpx.AsyncClient, mode: str, delay_s: float | None) -> None:
    probe = ctx.probe("backend", f"fault {mode}")
    await ctx.fault(mode, delay_s)
    try:
        job = await send(
            client,
            "POST",
            JOBS,
            ctx.bound_s,
            headers=auth(TENANT_A),
            json_body={"kind": "relquery", "template": "row {x}", "rows": [{"x": i} for i in range(6)], "slo_s": 60},
        )
        calls = gather_limited((call(client, ctx, probe, i, OK | FAULT | SHED) for i in range(ctx.count(120))), 16)
        await calls
        payload = job.json()
        if probe.judge(job, OK, "POST /v1/jobs relquery") and isinstance(payload, dict):
            job_id = str(payload.get("id"))
            check_job_end(probe, await wait_job(client, job_id, auth(TENANT_A), ctx.bound_s * 2), job_id)
    finally:
        await ctx.fault("none")


async def run_backend(ctx: Ctx) -> None:
    async with ctx.client(limit=32) as client:
        for mode, delay_s in FAULTS:
            await _under_fault(ctx, client, mode, delay_s)
        probe = ctx.probe("backend", "recovery after faults")
        await gather_limited((call(client, ctx, probe, i, OK) for i in range(ctx.count(60))), 8)


async def run_overload(ctx: Ctx) -> None:
    """A burst of concurrent calls while the faulty backend answers slowly: 2xx or a shed, nothing else."""
    probe = ctx.probe("overload", "burst far above capacity")
    await ctx.fault("slow_first_byte", 1.0)
    try:
        burst = ctx.count(3000)
        async with ctx.client(limit=512) as client:
            await gather_limited((call(client, ctx, probe, i, OK | SHED) for i in range(burst)), 512)
    finally:
        await ctx.fault("none")
    if probe.shed == 0 and ctx.scale >= 1:
        probe.fail(f"no 429/503 in a burst of {burst} calls at 512 at once (80 slots)")


# ---- slow clients ----------------------------------------------------------------------------------------
def _heads(host: str) -> dict[str, bytes]:
    stream = json.dumps({**VALID[COMPLETIONS], "stream": True, "max_tokens": 2000}).encode()
    key = auth(TENANT_A)["authorization"]
    post = f"POST {COMPLETIONS} HTTP/1.1\r\nHost: {host}\r\nauthorization: {key}\r\ncontent-type: application/json\r\n"
    return {
        "half-sent headers": post.encode()[:-20],
        "half-sent body": (post + "Content-Length: 1000\r\n\r\n").encode() + b'{"prompt": "he',
        "idle sockets": b"",
        "slow stream reader": (post + f"Content-Length: {len(stream)}\r\n\r\n").encode() + stream,
    }


async def _held(host: str, port: int, payload: bytes, bound_s: float, reader_gone: bool) -> bool:
    """Open a socket, send ``payload``, then wait for the server to close it (True) within ``bound_s``. The
    slow reader reads nothing for a while, then drains (a stream finished within its bound passes too)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        if payload:
            writer.write(payload)
            await writer.drain()
        if reader_gone:
            await asyncio.sleep(bound_s / 2)
        deadline = time.monotonic() + bound_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), left)
            except TimeoutError:
                return False
            if not chunk or (reader_gone and b"data: [DONE]" in chunk):
                return True
        return False
    except OSError:
        return True  # reset by the server: closed
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def run_slow_clients(ctx: Ctx) -> None:
    parts = urlsplit(ctx.url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    sizes = {"half-sent headers": 20, "half-sent body": 20, "idle sockets": ctx.count(600), "slow stream reader": 4}
    bound = SLOW_CLIENT_BOUND_S if ctx.scale >= 1 else 2.0
    groups = []
    for name, payload in _heads(f"{host}:{port}").items():
        held = [_held(host, port, payload, bound, name == "slow stream reader") for _ in range(sizes[name])]
        groups.append((ctx.probe("slow-clients", name), asyncio.gather(*held)))
    meanwhile = ctx.probe("slow-clients", "real calls meanwhile")
    await asyncio.sleep(0.5)
    async with ctx.client(limit=8) as client:
        await gather_limited((call(client, ctx, meanwhile, i, OK) for i in range(ctx.count(30))), 4)
    for probe, results in groups:
        for closed in await results:
            probe.sent += 1
            if not closed:
                probe.hangs += 1
                probe.fail(f"socket still open after {bound:.0f} s")
