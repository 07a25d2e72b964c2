"""Chaos families of issue 25, "nothing a client sends reaches the engine unchecked":

- ``engine-fields``: every ``slosched_*`` extra argument through every entry point (completions, chat,
  relQuery ``params``, stage calls) must be refused with a 400 naming the field;
- ``streams``: a backend answering a streamed call with an invalid body; a 200 that is not a whole stream
  (ending ``data: [DONE]``) counts as ``lost``;
- ``outage``: both backends down (health failing, calls reset), then back: a burst 1.5 s later must flow;
- ``act-as``: a key acting for a tenant the operator did not configure keeps its own rate limit;
- ``fd``: more connections than the gateway's open-file limit leaves room for: each answered (200 or 503);
- ``starvation``: one tenant floods, another sends a few calls: the light tenant must get its calls
  through (an isolation violation when starved below its share; passes once fair sharing lands).
"""

from __future__ import annotations

import asyncio
import socket
import time

import httpx

from slosched.bench.chaos.bad_input import CHAT, COMPLETIONS, JOBS, VALID
from slosched.bench.chaos.core import BAD_INPUT, FAULT, OK, SHED, Ctx, Probe, Reply, gather_limited, send
from slosched.bench.chaos.setup import FD_CONNECTIONS, TENANT_A, TENANT_B, TENANT_PROXY, auth
from slosched.contract import HEADER_TENANT, XARGS

A = auth(TENANT_A)
STREAM = {**VALID[COMPLETIONS], "stream": True}


def _names_field(probe: Probe, reply: Reply, field: str, what: str) -> None:
    if probe.judge(reply, BAD_INPUT, what) and field not in reply.body.decode(errors="replace"):
        probe.fail(f"{what}: the 400 does not name {field}")


async def run_engine_fields(ctx: Ctx) -> None:
    """One probe per engine field, each through the four entry points."""
    async with ctx.client(limit=8) as client:
        created = await send(client, "POST", JOBS, ctx.bound_s, json_body=VALID[JOBS], headers=A)
        payload = created.json()
        job = payload.get("id") if isinstance(payload, dict) else None
        for field in sorted(XARGS):
            probe = ctx.probe("engine-fields", field)
            xargs = {field: 1e-6}
            bodies = [
                (COMPLETIONS, {**VALID[COMPLETIONS], "vllm_xargs": xargs}),
                (CHAT, {**VALID[CHAT], "vllm_xargs": xargs}),
                (JOBS, {"kind": "relquery", "template": "q {a}", "rows": [{"a": 1}], "params": {"vllm_xargs": xargs}}),
            ]
            if job is not None:
                stage = {"calls": [{**VALID[COMPLETIONS], "vllm_xargs": xargs}]}
                bodies.append((f"{JOBS}/{job}/stages", stage))
            for path, body in bodies:
                reply = await send(client, "POST", path, ctx.bound_s, json_body=body, headers=A)
                _names_field(probe, reply, field, f"POST {path} vllm_xargs.{field}")
        if job is not None:
            await send(client, "POST", f"{JOBS}/{job}/complete", ctx.bound_s, headers=A)


async def _streamed(client: httpx.AsyncClient, ctx: Ctx, probe: Probe) -> None:
    reply = await send(client, "POST", COMPLETIONS, ctx.bound_s, json_body=STREAM, headers=A)
    if probe.judge(reply, OK | FAULT | SHED, "POST stream=True (invalid backend)") and reply.status == 200:
        body = reply.body.rstrip()
        if not body.endswith(b"data: [DONE]") and b'"error"' not in body:
            probe.lost += 1
            probe.fail(f"200 with an invalid stream {reply.body[:40]!r}")


async def run_streams(ctx: Ctx) -> None:
    probe = ctx.probe("streams", "streamed invalid bodies are never a success")
    await ctx.fault("invalid")
    try:
        async with ctx.client(limit=8) as client:
            await gather_limited((_streamed(client, ctx, probe) for _ in range(ctx.count(300))), 8)
    finally:
        await ctx.fault("none")


async def _set_all(ctx: Ctx, mode: str) -> None:
    async with httpx.AsyncClient(timeout=5.0) as control:
        for url in ctx.backend_urls:
            (await control.post(f"{url}/_fault", json={"mode": mode})).raise_for_status()


async def run_outage(ctx: Ctx) -> None:
    """Every backend down (the gateway answers 502/503), then back: 1.5 s later a burst must all succeed."""
    if not ctx.backend_urls:
        return
    during = ctx.probe("outage", "a full outage is answered 502/503")
    after = ctx.probe("outage", "a burst 1.5 s after recovery all succeeds")
    async with ctx.client(limit=64) as client:
        try:
            await _set_all(ctx, "down")
            await asyncio.sleep(1.0)  # the health checks see it
            for _ in range(10):
                reply = await send(client, "POST", COMPLETIONS, ctx.bound_s, json_body=VALID[COMPLETIONS], headers=A)
                during.judge(reply, FAULT | SHED, "POST during the outage")
        finally:
            await _set_all(ctx, "none")
        await asyncio.sleep(1.5)
        calls = (
            send(client, "POST", COMPLETIONS, ctx.bound_s, json_body=VALID[COMPLETIONS], headers=A) for _ in range(60)
        )
        for reply in await asyncio.gather(*calls):
            after.judge(reply, OK, "POST after recovery")


async def run_act_as(ctx: Ctx) -> None:
    """The proxy key (5 requests/s) acting for made-up tenants: its own rate limit still holds."""
    probe = ctx.probe("act-as", "acting for an unconfigured tenant keeps the caller's limits")
    async with ctx.client(limit=4) as client:
        passed = 0
        for index in range(30):
            headers = {**auth(TENANT_PROXY), HEADER_TENANT: f"ghost-{index % 3}", "x-slo-deadline-ms": "2"}
            reply = await send(client, "POST", COMPLETIONS, ctx.bound_s, json_body=VALID[COMPLETIONS], headers=headers)
            passed += probe.judge(reply, OK | SHED, "POST as ghost") and reply.status == 200
        if passed > 12:  # a burst of 5 and 5/s while the 30 calls last
            probe.violation(f"{passed} of 30 calls passed a 5 requests/s limit by acting for made-up tenants")


def _held_connections(port: int, count: int) -> list[bytes]:
    """Open ``count`` connections at once, each asking ``GET /health``; what each got (b"" for none)."""
    sockets, answers = [], []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
            sockets.append(sock)
        for sock in sockets:
            try:
                answers.append(sock.recv(4096))
            except OSError:
                answers.append(b"")
    finally:
        for sock in sockets:
            sock.close()
    return answers


async def run_fd(ctx: Ctx) -> None:
    probe = ctx.probe("fd", "connections past the open-file limit are answered 503")
    port = int(ctx.url.rsplit(":", 1)[1])
    for answer in await asyncio.to_thread(_held_connections, port, FD_CONNECTIONS):
        status = answer[9:12] if answer.startswith(b"HTTP/1.1 ") else b""
        probe.sent += 1
        probe.shed += status == b"503"
        if status not in (b"200", b"503"):
            probe.fail(f"a connection got {answer[:40]!r} (closed or silent), not 200/503")
    await asyncio.sleep(0.5)


async def run_starvation(ctx: Ctx) -> None:
    """Tenant A floods (256 calls at once, repeatedly) while B sends 20 calls: B must get >= 90% through."""
    probe = ctx.probe("starvation", "a light tenant is not starved by a flooding one")
    stop = time.monotonic() + 6.0
    async with ctx.client(limit=256) as flood_client, ctx.client(limit=8) as light_client:

        async def flood() -> None:
            while time.monotonic() < stop:
                await send(flood_client, "POST", COMPLETIONS, ctx.bound_s, json_body=VALID[COMPLETIONS], headers=A)

        flooders = [asyncio.create_task(flood()) for _ in range(256)]
        await asyncio.sleep(1.0)
        ok = 0
        for _ in range(20):
            reply = await send(
                light_client, "POST", COMPLETIONS, ctx.bound_s, json_body=VALID[COMPLETIONS], headers=auth(TENANT_B)
            )
            ok += probe.judge(reply, OK | SHED, "POST by the light tenant") and reply.status == 200
            await asyncio.sleep(0.1)
        await asyncio.gather(*flooders)
    if ok < 18:
        probe.violation(f"the light tenant got {ok} of 20 calls through while another flooded")
