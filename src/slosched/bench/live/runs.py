"""``slosched bench live``: the slosched stack against the baselines on real vLLM CPU servers (tiny models of
2 and 8 layers), on CHESS Text-to-SQL workflows and on a mixed multi-tenant workload (``setup``).

Four servers run at once, two per system, each pair pinned to cores 0 and 1 (an idle vLLM server takes no
CPU, so a pair waiting its turn does not slow the pair being measured): plain vLLM for the baselines, and
vLLM with slosched's scheduler plugin (engine preset ``slosched``) for the stack, whose gateway runs
``policies: {stack: slosched}``. Every call is replayed with ``ignore_eos`` + ``max_tokens``, so vLLM does
exactly the trace's work. Each seed's jobs run on every row back to back (same jobs, SLOs and arrival
times), so slow drift of the machine touches every row alike; the spread over seeds is reported. The
gateway's concurrency window is 64 per server, so it never caps vLLM's own batching below what the load
needs. vllm-router runs once per policy and run, fresh. The servers come from ``$SLOSCHED_VLLM_URLS`` (plain)
and ``$SLOSCHED_VLLM_PLUGIN_URLS`` (plugin, preset ``slosched``) when set (reused), else they are started
and stopped by PID here. ``SLOSCHED_LIVE_SEEDS=N``, ``SLOSCHED_LIVE_LOAD=X`` (multiplies the offered load)
and ``SLOSCHED_LIVE_EXTRA_ROWS=1`` change the run; the full run writes docs/results/live.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

import slosched.bench.live.report as live_report
from slosched.bench.base import check_row
from slosched.bench.gateway import peer_router, wait_http
from slosched.bench.live.setup import (
    RATES,
    STACK_LABEL,
    WORKLOADS,
    Row,
    Sizes,
    Speed,
    build_jobs,
    parse_counters,
    rows,
    salt_prefixes,
    sizes,
    with_slos,
)
from slosched.client.sdk import AsyncClient, ReplayResult, WorkflowRunner, attainment, call_body
from slosched.core.job import CallSpec, JobSpec
from slosched.devtools.stub import free_port, serve_app
from slosched.devtools.up import VllmServer, start_servers, stop_servers, wait_ready
from slosched.devtools.vllm_launch import start_plugin_servers
from slosched.evaluation.rows import row_finished
from slosched.gateway.http.app import Gateway
from slosched.gateway.ops.config import parse_config
from slosched.gateway.ops.prometheus import counter_value
from slosched.policies.spec import PolicyPair

LAYERS = (2, 8)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass(slots=True, frozen=True)
class Servers:
    plain: list[str]
    plugin: list[str]
    startup_s: float

    def urls(self, row: Row) -> list[str]:
        return self.plugin if row.servers == "plugin" else self.plain


@contextlib.contextmanager
def _servers() -> Iterator[Servers]:
    """Plain and plugin server pairs (from the environment, else started here and stopped by PID)."""
    plain_env, plugin_env = os.environ.get("SLOSCHED_VLLM_URLS"), os.environ.get("SLOSCHED_VLLM_PLUGIN_URLS")
    work_dir = Path(tempfile.mkdtemp(prefix="slosched-live-"))
    start = time.monotonic()
    started: list[VllmServer] = []
    try:
        plain = plain_env.split(",") if plain_env else []
        if not plain_env:
            started += start_servers(LAYERS, work_dir)
            plain = [server.url for server in started]
        plugin = plugin_env.split(",") if plugin_env else []
        if not plugin_env:
            engine = PolicyPair.parse(STACK_LABEL).engine  # the stack's engine preset, by the stack's name
            launched = [p.server for p in start_plugin_servers(LAYERS, work_dir, engine)]
            started += launched
            plugin = [server.url for server in launched]
        _say(f"live: servers {plain} (plain), {plugin} (plugin); logs in {work_dir}")
        wait_ready(started, timeout_s=900)
        yield Servers(plain, plugin, time.monotonic() - start if started else 0.0)
    finally:
        stop_servers(started)


async def probe(url: str) -> Speed:
    """A server alone: per-call overhead (1-token call), then per output and per prompt token beyond it."""
    async with AsyncClient(url, timeout_s=120) as client:

        async def timed(call: CallSpec) -> float:
            begin = time.monotonic()
            await client.post_body(call_body(call), {})
            return time.monotonic() - begin

        await timed(CallSpec(8, 4))  # warm-up: first decode and prefill shapes
        await timed(CallSpec(512, 4))
        per_call = min([await timed(CallSpec(8, 1)) for _ in range(3)])
        decode = max(await timed(CallSpec(8, 65)) - per_call, 0.0) / 64
        prefill = max(await timed(CallSpec(1032, 1)) - per_call, 0.0) / 1024
    return Speed(per_call, decode, prefill)


def _counters(urls: Sequence[str]) -> list[dict[str, float]]:
    return [parse_counters(httpx.get(f"{url}/metrics", timeout=10.0).text) for url in urls]


def _config(urls: Sequence[str], row: Row) -> dict[str, Any]:
    backends = [
        {
            "name": f"vllm-{i}",
            "url": url,
            "model": "tiny",
            "max_concurrency": 64,
            "max_queue": 1024,
            "forward_priority": row.forward_priority,
        }
        for i, url in enumerate(urls)
    ]
    # Multi-tenant workloads name their tenants themselves on this open bench gateway.
    return {
        "backends": backends,
        "policies": dict(row.policies),
        "scrape_interval_s": 0.5,
        "timeouts": {"queue_s": 300, "first_byte_s": 300},
        "trust_tenant_header": True,
    }


async def _replay_gateway(
    urls: Sequence[str], row: Row, jobs: list[JobSpec]
) -> tuple[list[ReplayResult], float | None]:
    """The run's results, and the share of routed prompt tokens the gateway's prefix index expected cached
    (None when nothing was routed)."""
    gateway = Gateway(parse_config(_config(urls, row)))
    async with serve_app(gateway.app, lifespan="on") as url, AsyncClient(url) as client:
        results = await WorkflowRunner(client).replay(jobs)
    metrics = gateway.dispatcher.metrics
    queries = counter_value(metrics, "slosched:prefix_index_queries_total")
    expected = counter_value(metrics, "slosched:prefix_index_hits_total") / queries if queries else None
    return results, expected


async def _replay_direct(url: str, jobs: list[JobSpec]) -> list[ReplayResult]:
    async with AsyncClient(url) as client:
        return await WorkflowRunner(client, direct=True).replay(jobs)


@contextlib.contextmanager
def _peer(executable: Path, urls: Sequence[str], policy: str) -> Iterator[str]:
    """A fresh vllm-router with ``policy`` in front of ``urls``, stopped by PID afterwards."""
    port = free_port()
    command = [
        str(executable),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--worker-urls",
        *urls,
        "--policy",
        policy,
        "--log-level",
        "error",
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def run_figures(jobs: Sequence[JobSpec], results: Sequence[ReplayResult]) -> dict[str, Any]:
    """Attainment, mean latency and per-tenant (met, jobs) of one run (results in the jobs' order)."""
    met, mean = attainment(results)
    tenants: dict[str, tuple[int, int]] = {}
    for job, result in zip(jobs, results, strict=True):
        done, count = tenants.get(job.tenant, (0, 0))
        tenants[job.tenant] = (done + result.slo_met, count + 1)
    return {
        "slo_attainment": met,
        "met": sum(r.slo_met for r in results),
        "jobs": len(results),
        "mean_latency_s": mean,
        "tenants": tenants,
    }


def _run_once(servers: Servers, row: Row, jobs: list[JobSpec], peer: Path | None) -> dict[str, Any]:
    urls = servers.urls(row)
    before = _counters(urls)
    start = time.monotonic()
    expected_hit_rate = None  # the gateway's own estimate: rows through vllm-router have none
    if row.kind == "gateway":
        results, expected_hit_rate = asyncio.run(_replay_gateway(urls, row, jobs))
    else:
        assert peer is not None and row.peer_policy is not None
        with _peer(peer, urls, row.peer_policy) as peer_url:
            results = asyncio.run(_replay_direct(peer_url, jobs))
    wall_s = time.monotonic() - start
    after = _counters(urls)
    delta = [{key: a[key] - b[key] for key in a} for a, b in zip(after, before, strict=True)]
    served = [d["vllm:request_success_total"] for d in delta]
    check_row(f"live {row.label}", [result.status for result in results], served)
    queries = sum(d["vllm:prefix_cache_queries_total"] for d in delta)
    hits = sum(d["vllm:prefix_cache_hits_total"] for d in delta)
    return {
        **run_figures(jobs, results),
        "wall_s": wall_s,
        "prefix_hit_rate": hits / queries if queries else 0.0,
        "gateway_expected_hit_rate": expected_hit_rate,
        "requests_per_server": served,
    }


def _measure(servers: Servers, table: Sequence[Row], peer: Path | None, chosen: Sizes) -> dict[str, Any]:
    load = chosen.load
    probes = {url: asyncio.run(probe(url)) for url in [*servers.plain, *servers.plugin]}
    speed = Speed.mean([probes[url] for url in servers.plain])  # the SLO basis: stock vLLM alone
    salt = secrets.token_hex(3)  # prefix keys never repeat across runs, nor across invocations
    runs: list[dict[str, Any]] = []
    for seed in chosen.seeds:
        for workload in WORKLOADS:
            jobs = with_slos(workload, build_jobs(workload, chosen.jobs(workload), seed, load), speed)
            for row in table:
                if row.kind == "peer" and peer is None:
                    continue
                salted = salt_prefixes(jobs, f"{salt}-{seed}-{row.label}")
                run = {"workload": workload, "seed": seed, "row": row.label, **_run_once(servers, row, salted, peer)}
                runs.append(run)
                row_finished(f"{workload} seed {seed} {row.label}", run)  # kept if Ctrl-C stops the rest
                _say(
                    f"live: {workload} seed {seed} {row.label}: attainment {run['slo_attainment']:.2f}, "
                    f"mean {run['mean_latency_s']:.2f} s, {run['wall_s']:.0f} s"
                )
    return {
        "runs": runs,
        "speed": asdict(speed),
        "probes": {url: asdict(p) for url, p in probes.items()},
        "rates": {name: RATES[name] * load for name in WORKLOADS},
        "jobs": {name: chosen.jobs(name) for name in WORKLOADS},
        "seeds": list(chosen.seeds),
    }


def run(quick: bool) -> dict[str, Any]:
    began = time.monotonic()
    chosen = sizes(quick)  # before any server starts: a bad variable fails at once
    table = rows(os.environ.get("SLOSCHED_LIVE_EXTRA_ROWS") == "1")
    peer, peer_text = peer_router(install=not quick)
    peer_text = peer_text.split(", --policy")[0]  # the description names the gateway bench's one policy
    figures: dict[str, Any] = {"rows": [row.label for row in table]}
    figures["peer"] = peer_text if peer else f"unavailable: {peer_text}"
    with _servers() as servers:
        figures["server_startup_s"] = servers.startup_s
        figures.update(_measure(servers, table, peer, chosen))
    figures["summary"] = live_report.summarize(figures["runs"])
    figures["wall_s"] = time.monotonic() - began
    summary = figures["summary"]
    wall = f"wall {figures['wall_s']:.0f} s (server start-up {figures['server_startup_s']:.0f} s)"
    _say("\n".join(["", *live_report.table_lines(summary), "", *live_report.verdict_lines(summary), wall]))
    if not quick:
        live_report.write_report(figures)
    return figures
