"""``slosched bench chaos``: a chaos suite that counts. It starts the gateway as a real server process in
front of two fake vLLM servers (one with switchable faults, ``devtools.faulty``; see ``setup``) and
runs probe families against it, in this order:

``tenants`` (isolation, ``tenants``), ``input`` (bad input on every route, ``bad_input``), ``fuzz``
(seeded bodies and headers, ``fuzz``), ``traffic`` (valid calls and job flows, the bulk of the
requests), ``backend`` / ``overload`` / ``slow-clients`` (``faults``), ``engine-fields`` / ``streams`` / ``outage`` /
``act-as`` / ``fd`` / ``starvation`` (``trust``: issue 25), ``queued-disconnect`` (``races``: running and
queued clients leaving at once), ``accounting`` (every accepted call reached a
terminal outcome, per the gateway's /metrics; resident memory growth) and ``restart`` (SIGTERM with a
relQuery in flight, start again on the same job store).

A family that crashes records the crash as a failed probe; the suite always finishes and prints its counts
(``core``): the JSON object (last line with ``--json``) is exactly ``{"probes", "sent", "clear_4xx",
"server_errors", "hangs", "lost", "isolation_violations", "rss_growth_mb"}``. Targets: server_errors, hangs,
lost and isolation_violations all 0, rss_growth_mb < 20. Quick: >= 55 probes, >= 10,000 requests. ``lost``
includes a call delivered as a success with an invalid body; ``isolation_violations`` a tenant starved below
its share while another floods.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

import slosched.bench.chaos.setup as setup
from slosched.bench.chaos.bad_input import JOBS, VALID, run_input
from slosched.bench.chaos.core import OK, Ctx, gather_limited, send, totals
from slosched.bench.chaos.faults import call, check_job_end, run_backend, run_overload, run_slow_clients, wait_job
from slosched.bench.chaos.fuzz import run_fuzz
from slosched.bench.chaos.races import run_queued_disconnect
from slosched.bench.chaos.report import print_report, progress
from slosched.bench.chaos.tenants import run_restart, run_tenants
from slosched.bench.chaos.trust import run_act_as, run_engine_fields, run_fd, run_outage, run_starvation, run_streams

RSS_BOUND_MB = 20.0
SEED = 0
Family = tuple[str, Callable[[Ctx], Awaitable[None]]]


async def run_traffic(ctx: Ctx) -> None:
    """Valid calls (plain, streamed, chat) at 32 at once, and workflow flows (create, stage, complete)."""
    probe = ctx.probe("traffic", "valid calls")
    async with ctx.client(limit=32) as client:
        await gather_limited((call(client, ctx, probe, i, OK) for i in range(ctx.count(9000))), 32)
        flows = ctx.probe("traffic", "workflow flows")
        await gather_limited((_flow(ctx, client, flows) for _ in range(ctx.count(60))), 4)


async def _flow(ctx: Ctx, client: httpx.AsyncClient, probe: Any) -> None:
    headers = setup.auth(setup.TENANT_A)
    created = await send(client, "POST", JOBS, ctx.bound_s, json_body=VALID[JOBS], headers=headers)
    payload = created.json()
    if not (probe.judge(created, OK, "POST /v1/jobs") and isinstance(payload, dict)):
        return
    job = f"{JOBS}/{payload['id']}"
    stage = await send(
        client, "POST", f"{job}/stages", ctx.bound_s, json_body=VALID["/v1/jobs/{id}/stages"], headers=headers
    )
    probe.judge(stage, OK, "POST stage")
    probe.judge(await send(client, "POST", f"{job}/complete", ctx.bound_s, headers=headers), OK, "POST complete")
    check_job_end(probe, await wait_job(client, str(payload["id"]), headers, ctx.bound_s), str(payload["id"]))


async def accounting(ctx: Ctx, settle_s: float = 10.0) -> None:
    """Once idle, every call the gateway accepted must have reached a terminal outcome."""
    probe = ctx.probe("accounting", "accepted calls all terminal (/metrics)")
    deadline = time.monotonic() + settle_s
    accepted = terminal = 0.0
    async with ctx.client() as client:
        while time.monotonic() < deadline:
            reply = await send(client, "GET", "/metrics", ctx.bound_s)
            if reply.status != 200:
                probe.fail(f"/metrics answered {reply.status}")
                return
            accepted, terminal = metrics_balance(reply.body.decode(errors="replace"))
            if accepted == terminal:
                break
            await asyncio.sleep(0.5)
    probe.sent += 1
    if accepted != terminal:
        probe.lost += max(int(accepted - terminal), 0)
        probe.fail(f"accepted {accepted:.0f} calls, {terminal:.0f} terminal after {settle_s:.0f} s idle")


def metrics_balance(text: str) -> tuple[float, float]:
    """(``slosched:requests_accepted_total``, sum of ``slosched:requests_total``) from exposition text."""
    accepted = terminal = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "slosched:requests_accepted_total":
                accepted += sample.value
            elif sample.name == "slosched:requests_total":
                terminal += sample.value
    return accepted, terminal


async def run_families(ctx: Ctx, families: list[Family]) -> None:
    """Run each family; a crash becomes a failed probe of that family, never the end of the suite."""
    with progress() as bar:
        task = bar.add_task("starting", total=len(families))
        for name, family in families:
            bar.update(task, description=f"{name} ({sum(p.sent for p in ctx.probes):,} requests so far)")
            try:
                await family(ctx)
            except Exception as error:  # the suite reports what broke and goes on
                ctx.probe(name, "family ran to the end").fail(f"crashed: {type(error).__name__}: {error}"[:160])
            bar.advance(task)
        bar.update(task, description=f"done ({sum(p.sent for p in ctx.probes):,} requests)")


def families(seed: int) -> list[Family]:
    async def fuzz(ctx: Ctx) -> None:
        await run_fuzz(ctx, seed)

    return [
        ("tenants", run_tenants),
        ("input", run_input),
        ("fuzz", fuzz),
        ("traffic", run_traffic),
        ("backend", run_backend),
        ("overload", run_overload),
        ("slow-clients", run_slow_clients),
        ("engine-fields", run_engine_fields),
        ("streams", run_streams),
        ("outage", run_outage),
        ("act-as", run_act_as),
        ("fd", run_fd),
        ("starvation", run_starvation),
        ("queued-disconnect", run_queued_disconnect),
    ]


async def _suite(servers: setup.ServerProcesses, ctx: Ctx, seed: int, only: tuple[str, ...] | None) -> float:
    """The families (``only`` these, if given) against started servers; the gateway's RSS growth (MB)."""
    async with ctx.client() as client:  # warm-up: pools, lazy imports, caches
        warm = ctx.probe("traffic", "warm-up")
        await gather_limited((call(client, ctx, warm, i, OK) for i in range(ctx.count(600))), 16)
    rss_before = servers.rss_mb()
    await run_families(ctx, [family for family in families(seed) if only is None or family[0] in only])
    await accounting(ctx)
    growth = servers.rss_mb() - rss_before
    probe = ctx.probe("accounting", f"gateway RSS growth < {RSS_BOUND_MB:g} MB")
    if not growth < RSS_BOUND_MB:
        probe.fail(f"RSS grew {growth:.1f} MB ({rss_before:.0f} -> {rss_before + growth:.0f} MB)")

    async def restart() -> float | None:
        took = await asyncio.to_thread(setup.stop_gateway, servers, 15.0)
        await asyncio.to_thread(setup.start_gateway, servers)
        ctx.url = servers.url
        return took

    if only is None or "restart" in only:
        await run_families(ctx, [("restart", lambda ctx: run_restart(ctx, restart))])
    return growth


def run_suite(quick: bool, scale: float = 1.0, seed: int = SEED, only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Start the servers in a temporary folder, run the suite (``only`` these families, if given; the
    accounting always), stop every process; the JSON counts."""
    with tempfile.TemporaryDirectory(prefix="slosched-chaos-") as folder:
        servers = setup.start_backends(Path(folder))
        try:
            setup.start_gateway(servers)
            ctx = Ctx(servers.url, servers.faulty_url, quick=quick, scale=scale, legacy=servers.legacy_reason)
            ctx.backend_urls = tuple(servers.backend_urls.values())
            if servers.legacy:
                ctx.probe("setup", "tenant config accepted").fail(servers.legacy_reason)
            growth = asyncio.run(_suite(servers, ctx, seed, only))
        finally:
            setup.stop_all(servers)
    out = totals(ctx.probes, growth)
    print_report(ctx.probes, out)
    return out


def run(quick: bool) -> dict[str, Any]:
    return run_suite(quick)
