"""The soak benchmark's pieces: RSS reading, terminal-state classes and accounting, the mixed load against
an in-process gateway (fast), and a few-second end-to-end soak with subprocesses (slow)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from slosched.bench.soak.report import write_report
from slosched.bench.soak.runs import (
    TERMINAL_CLASSES,
    Accounting,
    SoakLoad,
    classify,
    drive,
    gateway_accounting,
    not_completed,
    request_bytes,
    rss_mb,
    soak,
)
from slosched.gateway.ops.prometheus import GatewayMetrics
from tests.gateway.helpers import background_gateway


def test_rss_of_this_process_is_plausible_and_grows_with_an_allocation() -> None:
    before = rss_mb(os.getpid())
    block = bytearray(64 * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])  # touch every page so it is resident
    assert 5.0 < before < 10_000.0 and rss_mb(os.getpid()) - before > 50.0
    del block


def test_classify_and_accounting_give_each_request_exactly_one_class() -> None:
    cases = {200: "2xx", 201: "2xx", 400: "4xx", 413: "4xx", 429: "429", 502: "5xx", 503: "5xx", 302: "other"}
    for status, expected in cases.items():
        assert classify(status) == expected
    assert classify(None) == "conn_error" and classify(None, timed_out=True) == "timeout"
    accounting = Accounting(sent=6)
    for status, timed_out, malformed in (
        (200, False, False),
        (400, False, True),
        (200, False, True),
        (503, False, False),
        (None, True, False),
    ):
        accounting.end(status, timed_out, malformed)
    assert sum(accounting.terminal.values()) == 5 and accounting.lost == 1
    assert accounting.unexpected == 3  # a malformed request answered 2xx, a 503, a timeout
    assert set(accounting.terminal) == set(TERMINAL_CLASSES)


def test_gateway_accounting_reads_the_gateways_own_counters() -> None:
    metrics = GatewayMetrics(lambda: [])
    metrics.accepted.inc(5)
    metrics.requests.labels("completed", "").inc(4)
    metrics.requests.labels("failed", "upstream").inc(1)
    metrics.jobs.labels("workflow", "completed").inc(2)
    assert gateway_accounting(metrics.render().decode()) == {"accepted": 5.0, "terminal": 5.0, "jobs_terminal": 2.0}
    assert not_completed(metrics.render().decode()) == {"failed/upstream": 1.0}


def test_request_bytes_is_a_complete_http_request() -> None:
    raw = request_bytes("127.0.0.1", 8080, "/v1/completions", b"{}", {"x-tenant": "a"})
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/completions HTTP/1.1") and b"x-tenant: a" in head
    assert b"Content-Length: 2" in head and body == b"{}"


def test_mixed_load_against_an_in_process_gateway_ends_every_request() -> None:
    # The load plays tenant "gold" by header, as the soak bench's own gateway allows (trust_tenant_header).
    with background_gateway(backend={"max_concurrency": 64, "max_queue": 1024}, trust_tenant_header=True) as url:

        async def scenario() -> tuple[Accounting, SoakLoad, dict[str, float]]:
            accounting = Accounting()
            load = SoakLoad(url, accounting, seed=1)
            samples: list[float] = []
            try:
                await drive(load, rate=80.0, duration_s=1.5, sample=samples.append, sample_every_s=0.5)
                await asyncio.sleep(0.5)
                side = gateway_accounting((await load.http.get("/metrics")).text)
            finally:
                await load.close()
            assert len(samples) >= 3
            return accounting, load, side

        accounting, load, side = asyncio.run(scenario())
    assert accounting.sent >= 120 and accounting.lost == 0 and accounting.unexpected == 0
    assert accounting.terminal["2xx"] > 0 and accounting.terminal["4xx"] > 0  # the mix holds malformed requests
    assert side["accepted"] == side["terminal"] > 0 and side["jobs_terminal"] == load.jobs_created > 0


@pytest.mark.slow
def test_short_soak_with_subprocesses_reports_memory_and_terminal_states(tmp_path: Path) -> None:
    figures = soak(duration_s=3.0, warmup_s=1.0, rate=50.0, sample_every_s=0.5)
    assert figures["passed"] and figures["lost"] == 0 and figures["unexpected"] == 0
    assert figures["requests"] == sum(figures["terminal"].values()) >= 150
    assert 10.0 < figures["rss_start_mb"] < 2000.0 and len(figures["samples"]) >= 6
    assert figures["gateway"]["accepted"] == figures["gateway"]["terminal"]
    write_report(figures, 20.0, tmp_path)
    page = (tmp_path / "soak.md").read_text()
    assert f"| {figures['requests']:,} |" in page and (tmp_path / "soak" / "rss.png").stat().st_size > 1000
