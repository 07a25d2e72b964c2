"""Chaos family ``queued-disconnect`` (the queued-disconnect race of issue 25): running and queued clients leave
in the same instant.

Every backend answers slowly (``slow_first_byte``), a burst fills the backends' windows and queues, then every
client drops its connection at once. The slots the running calls free must not go to queued calls whose
clients left too: such a call would reach a backend and be recorded ``completed/ok`` for nobody. Judged on
the gateway's ``/metrics``: once idle, every call of the burst is ``cancelled/client_disconnected`` and none
more is ``completed``; each call recorded completed for a client that had left counts as ``lost`` (a success
on the books, no answer at the client).
"""

from __future__ import annotations

import asyncio
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from slosched.bench.chaos.bad_input import COMPLETIONS, VALID
from slosched.bench.chaos.core import Ctx, Probe, send
from slosched.bench.chaos.setup import BACKEND_QUEUE, BACKEND_WINDOW, TENANT_A, auth

HOLD_S = 1.5  # a backend's time to first byte: longer than the burst lives, shorter than the first-byte timeout
LEAVE_AFTER_S = 0.8  # every call has reached the gateway (running or queued) by then
SETTLE_S = 10.0


async def _outcomes(client: httpx.AsyncClient, ctx: Ctx) -> dict[str, float]:
    """``outcome/reason`` -> count from ``/metrics``, plus ``accepted``."""
    reply = await send(client, "GET", "/metrics", ctx.bound_s)
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(reply.body.decode(errors="replace")):
        for sample in family.samples:
            if sample.name == "slosched:requests_accepted_total":
                counts["accepted"] = counts.get("accepted", 0.0) + sample.value
            elif sample.name == "slosched:requests_total":
                key = f"{sample.labels['outcome']}/{sample.labels['reason']}"
                counts[key] = counts.get(key, 0.0) + sample.value
    return counts


async def _set_all(ctx: Ctx, mode: str, delay_s: float | None = None) -> None:
    body: dict[str, object] = {"mode": mode} | ({} if delay_s is None else {"delay_s": delay_s})
    async with httpx.AsyncClient(timeout=5.0) as control:
        for url in ctx.backend_urls:
            (await control.post(f"{url}/_fault", json=body)).raise_for_status()


async def _burst(ctx: Ctx, size: int) -> None:
    """``size`` calls at once; every connection dropped together ``LEAVE_AFTER_S`` later."""
    async with ctx.client(limit=size) as client:
        body, headers = VALID[COMPLETIONS], auth(TENANT_A)
        calls = [
            asyncio.create_task(send(client, "POST", COMPLETIONS, ctx.bound_s, json_body=body, headers=headers))
            for _ in range(size)
        ]
        await asyncio.sleep(LEAVE_AFTER_S)
        for call in calls:
            call.cancel()  # closes its connection; all in one step, as a crowd of clients leaving at once
        await asyncio.gather(*calls, return_exceptions=True)


async def _settled(client: httpx.AsyncClient, ctx: Ctx) -> dict[str, float]:
    """The outcomes once every accepted call is terminal (or after ``SETTLE_S``)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        counts = await _outcomes(client, ctx)
        terminal = sum(value for key, value in counts.items() if key != "accepted")
        if terminal >= counts.get("accepted", 0.0) or time.monotonic() > deadline:
            return counts
        await asyncio.sleep(0.25)


def _judge(probe: Probe, before: dict[str, float], after: dict[str, float], size: int) -> None:
    def delta(key: str) -> int:
        return round(after.get(key, 0.0) - before.get(key, 0.0))

    completed = sum(delta(key) for key in after if key.startswith("completed/"))
    left = delta("cancelled/client_disconnected")
    probe.sent += size
    if completed:
        probe.lost += completed
        probe.fail(f"{completed} of {size} calls whose clients had left ran and were recorded completed")
    if left != delta("accepted"):
        probe.fail(f"{delta('accepted')} accepted, {left} ended cancelled/client_disconnected")


async def run_queued_disconnect(ctx: Ctx) -> None:
    """Rounds of a burst filling every window and queue, whose clients all leave at once."""
    if not ctx.backend_urls:
        return
    probe = ctx.probe("queued-disconnect", "running and queued clients leaving at once: none completed")
    per_backend = BACKEND_WINDOW + BACKEND_QUEUE // 2  # every window full and half of every queue
    size = per_backend * len(ctx.backend_urls)
    async with ctx.client(limit=4) as client:
        for _ in range(max(ctx.count(15), 2)):
            before = await _settled(client, ctx)
            await _set_all(ctx, "slow_first_byte", HOLD_S)
            try:
                await _burst(ctx, size)
            finally:
                await _set_all(ctx, "none")
            _judge(probe, before, await _settled(client, ctx), size)
