"""``bench.chaos.runs``: the verdict on single replies, counting against fake gateways (a broken one must show
server errors, a hanging one hangs, a strict one clear 4xx only), and a tiny run against the real stack."""

from __future__ import annotations

import asyncio
import json

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from slosched.bench.chaos.bad_input import run_input
from slosched.bench.chaos.core import BAD_INPUT, FAULT, OK, SHED, Ctx, Probe, Reply, totals
from slosched.bench.chaos.fuzz import requests, run_fuzz
from slosched.bench.chaos.runs import run_suite
from slosched.bench.chaos.setup import BACKEND_QUEUE, BACKEND_WINDOW
from slosched.devtools.stub import serve_app

KEYS = ["probes", "sent", "clear_4xx", "server_errors", "hangs", "lost", "isolation_violations", "rss_growth_mb"]
CLEAR_400 = json.dumps({"error": {"message": "prompt: expected a string", "type": "invalid_request"}}).encode()


def test_judge_sorts_replies_into_the_counts() -> None:
    probe = Probe("f", "p")
    assert probe.judge(Reply(400, CLEAR_400), BAD_INPUT, "bad") and probe.clear_4xx == 1
    assert not probe.judge(Reply(500, CLEAR_400), BAD_INPUT | FAULT, "500") and probe.server_errors == 1
    assert probe.judge(Reply(502, CLEAR_400), FAULT, "fault") and probe.server_errors == 1
    assert not probe.judge(Reply(503, b"Service Unavailable"), FAULT, "bare 503") and probe.server_errors == 2
    assert not probe.judge(Reply(400, b"Traceback (most recent call last):"), BAD_INPUT, "tb")
    assert probe.server_errors == 3
    assert not probe.judge(Reply(None, timed_out=True), OK, "hang") and probe.hangs == 1
    echo = json.dumps({"error": {"message": "x" * 5000}}).encode()
    assert not probe.judge(Reply(400, echo), BAD_INPUT, "echo") and probe.clear_4xx == 1
    assert not probe.judge(Reply(200, b"{}"), BAD_INPUT, "accepted")
    assert not probe.judge(Reply(429, CLEAR_400), SHED, "no retry-after")
    assert probe.judge(Reply(429, CLEAR_400, {"Retry-After": "1"}), SHED, "shed") and probe.shed == 1
    assert probe.sent == 10 and not probe.passed and len(probe.failures) == 3


def test_totals_are_the_json_line_in_order() -> None:
    first, second = Probe("a", "x", sent=3, hangs=1), Probe("b", "y", sent=2, isolation_violations=1)
    out = totals([first, second], 1.234)
    assert list(out) == KEYS
    assert out == dict(zip(KEYS, [2, 5, 0, 0, 1, 0, 1, 1.2], strict=True))


def test_fuzz_requests_are_deterministic_by_seed() -> None:
    assert requests(7, 50, "/v1/completions") == requests(7, 50, "/v1/completions")
    assert requests(7, 50, "/v1/completions") != requests(8, 50, "/v1/completions")


def _fake(answer: str) -> Starlette:
    """A fake gateway on every path: ``broken`` answers 500 with a traceback, ``strict`` a clear 400,
    ``hang`` never answers."""

    async def handle(request: Request) -> Response:
        await request.body()
        if answer == "broken":
            return PlainTextResponse("Traceback (most recent call last):\n  boom", status_code=500)
        if answer == "hang":
            await asyncio.sleep(60)
        return JSONResponse({"error": {"message": "bad input", "type": "invalid_request"}}, status_code=400)

    methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
    return Starlette(routes=[Route("/{path:path}", handle, methods=methods)])


def _against(answer: str, bound_s: float = 5.0, with_input: bool = True) -> Ctx:
    async def main() -> Ctx:
        async with serve_app(_fake(answer)) as url:
            ctx = Ctx(url, None, quick=True, scale=0.01, bound_s=bound_s)
            if with_input:
                await run_input(ctx)
            await run_fuzz(ctx, seed=1)
            return ctx

    return asyncio.run(main())


def test_a_broken_gateway_shows_server_errors() -> None:
    ctx = _against("broken")
    out = totals(ctx.probes, 0.0)
    assert out["server_errors"] == out["sent"] > 100 and out["clear_4xx"] == 0
    assert all(not probe.passed for probe in ctx.probes)


def test_a_strict_gateway_passes_every_bad_input_probe_but_the_control() -> None:
    ctx = _against("strict")
    out = totals(ctx.probes, 0.0)
    assert out["clear_4xx"] == out["sent"] and out["server_errors"] == out["hangs"] == 0
    failed = {probe.name for probe in ctx.probes if not probe.passed}
    assert failed == {"valid-control"}  # a gateway refusing everything is caught by the control


def test_a_hanging_gateway_counts_hangs() -> None:
    ctx = _against("hang", bound_s=0.2, with_input=False)
    out = totals(ctx.probes, 0.0)
    assert out["hangs"] == out["sent"] > 50 and not any(probe.passed for probe in ctx.probes)


def test_a_tiny_run_against_the_real_gateway(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_suite(quick=True, scale=0.02, only=("tenants",))
    assert list(out) == KEYS and out["probes"] >= 9 and out["sent"] > 50
    assert out["server_errors"] == 0 and out["lost"] == 0
    assert "chaos: probe families" in capsys.readouterr().err


def test_the_queued_disconnect_race_family_finds_no_call_run_for_a_client_that_left() -> None:
    out = run_suite(quick=True, scale=0.02, only=("queued-disconnect",))
    assert out["sent"] >= 2 * 2 * (BACKEND_WINDOW + BACKEND_QUEUE // 2)  # two rounds of full windows, half queues
    assert out["lost"] == 0 and out["server_errors"] == 0 and out["hangs"] == 0
