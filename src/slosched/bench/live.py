"""``slosched bench live``: policies on real vLLM CPU servers (tiny models of 2 and 8 layers) through the
gateway, on a Text-to-SQL workflow trace and a chat trace, against vllm-router as the peer.

Traces come from the bundled generators (``text2sql-chess``, ``sharegpt``) with lengths scaled down so a
CPU serves them (inputs / 8 capped at 1,500 tokens, outputs / 6 capped at 128); every call is replayed with
``ignore_eos`` + ``max_tokens``, so vLLM does exactly the trace's work. A job's SLO is ``slo_scale`` times
its critical-path work at the per-token times probed on the two servers before the runs (no contention).
Rows: round-robin + FCFS (the plain vLLM setup), the best slosched compositions, and vllm-router's
round-robin (the peer, driving the same calls directly, without the job API). The gateway's concurrency
window is 64 per server, so it never caps vLLM's own batching below what the load needs. The servers come from
``$SLOSCHED_VLLM_URLS`` when set (reused), else two are started and stopped by PID here.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from slosched.bench.common import print_figures
from slosched.bench.gateway import peer_router, wait_http
from slosched.core.job import CallSpec, JobSpec
from slosched.devtools.stub import free_port, serve_app
from slosched.devtools.up import start_servers, stop_servers, wait_ready
from slosched.serve.app import Gateway
from slosched.serve.config import parse_config
from slosched.serve.sdk import AsyncClient, WorkflowRunner, attainment, call_body
from slosched.workloads.generators import make_workload

# (row name, router, engine, job policy, forward priority to vLLM)
POLICIES = (
    ("round-robin+fcfs", "round-robin", "fcfs", "deadline", False),
    ("least-tokens+chunked-fcfs", "least-tokens", "chunked-fcfs", "deadline", True),
    ("workload-balanced+urgency", "workload-balanced", "urgency", "stage-budget", True),
)
_RESULTS = Path("docs/results")


def scale_job(job: JobSpec) -> JobSpec:
    """The job with CPU-sized lengths (same structure and arrival)."""
    stages = []
    for stage in job.stages:
        calls = tuple(
            CallSpec(min(max(c.input_tokens // 8, 4), 1500), min(max(c.output_tokens // 6, 2), 128))
            for c in stage.calls
        )
        stages.append(replace(stage, calls=calls))
    return replace(job, stages=tuple(stages), slo_s=None)


def workloads(quick: bool) -> dict[str, list[JobSpec]]:
    count_sql, count_chat = (6, 30) if quick else (20, 120)
    sql = make_workload("text2sql-chess", {"process": "poisson", "rate": 0.6}, count_sql, seed=1)
    chat = make_workload("sharegpt", {"process": "poisson", "rate": 6.0}, count_chat, seed=2)
    return {"text2sql": [scale_job(j) for j in sql], "chat": [scale_job(j) for j in chat]}


def critical_path_s(job: JobSpec, s_per_token: float, s_per_prompt_token: float) -> float:
    """Work on the job's longest dependency chain, alone on a server (no queueing)."""
    deps = job.dependencies()
    finish: dict[str, float] = {}
    for stage in job.topological_stages():
        start = max((finish[parent] for parent in deps[stage.name]), default=0.0)
        work = max((c.output_tokens * s_per_token + c.input_tokens * s_per_prompt_token for c in stage.calls),
                   default=0.0)  # fmt: skip
        finish[stage.name] = start + work + stage.tool_duration_s
    return max(finish.values())


async def _probe(url: str) -> tuple[float, float]:
    """(seconds per output token, seconds per prompt token) of one server, alone."""
    async with AsyncClient(url, timeout_s=120) as client:
        await client.post_body(call_body(CallSpec(8, 4)), {})  # warm-up
        start = time.monotonic()
        await client.post_body(call_body(CallSpec(16, 64)), {})
        decode = (time.monotonic() - start) / 64
        start = time.monotonic()
        await client.post_body(call_body(CallSpec(1024, 1)), {})
        prefill = max(time.monotonic() - start - decode, 0.0) / 1024
    return decode, prefill


def _config(urls: Sequence[str], router: str, engine: str, job: str, priority: bool) -> dict[str, Any]:
    backends = [{"name": f"vllm-{i}", "url": url, "model": "tiny", "max_concurrency": 64, "max_queue": 1024,
                 "forward_priority": priority} for i, url in enumerate(urls)]  # fmt: skip
    return {"backends": backends, "policies": {"router": router, "engine": engine, "job": job},
            "scrape_interval_s": 0.5, "timeouts": {"queue_s": 300, "first_byte_s": 300}}  # fmt: skip


async def _run_gateway(
    urls: Sequence[str], policy: tuple[str, str, str, str, bool], jobs: list[JobSpec]
) -> dict[str, Any]:
    _, router, engine, job_policy, priority = policy
    gateway = Gateway(parse_config(_config(urls, router, engine, job_policy, priority)))
    async with serve_app(gateway.app, lifespan="on") as url, AsyncClient(url) as client:
        results = await WorkflowRunner(client).replay(jobs)
    met, mean = attainment(results)
    return {"slo_attainment": met, "mean_latency_s": mean, "jobs": len(results)}


async def _run_direct(url: str, jobs: list[JobSpec]) -> dict[str, Any]:
    async with AsyncClient(url) as client:
        results = await WorkflowRunner(client, direct=True).replay(jobs)
    met, mean = attainment(results)
    return {"slo_attainment": met, "mean_latency_s": mean, "jobs": len(results)}


@contextlib.contextmanager
def _servers() -> Iterator[tuple[list[str], float]]:
    existing = os.environ.get("SLOSCHED_VLLM_URLS")
    if existing:
        yield existing.split(","), 0.0
        return
    start = time.monotonic()
    servers = start_servers([2, 8], Path(tempfile.mkdtemp(prefix="slosched-live-")))
    try:
        wait_ready(servers, timeout_s=900)
        yield [server.url for server in servers], time.monotonic() - start
    finally:
        stop_servers(servers)


@contextlib.contextmanager
def _peer(urls: Sequence[str]) -> Iterator[tuple[str | None, str]]:
    executable, description = peer_router(install=False)
    if executable is None:
        yield None, description
        return
    port = free_port()
    command = [str(executable), "--host", "127.0.0.1", "--port", str(port), "--worker-urls", *urls,
               "--policy", "round_robin", "--log-level", "error"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", process)
        yield f"http://127.0.0.1:{port}", description
    except (RuntimeError, TimeoutError) as error:
        yield None, f"{description}: did not start ({error})"
    finally:
        process.terminate()
        process.wait(timeout=10)


def run(quick: bool, slo_scale: float = 4.0) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    figures: dict[str, Any] = {"rows": rows, "slo_scale": slo_scale}
    with _servers() as (urls, startup_s):
        figures["server_startup_s"] = startup_s
        probes = [asyncio.run(_probe(url)) for url in urls]
        decode = sum(p[0] for p in probes) / len(probes)
        prefill = sum(p[1] for p in probes) / len(probes)
        figures["probe_s_per_token"] = [round(p[0], 5) for p in probes]
        with _peer(urls) as (peer_url, peer_text):
            figures["peer"] = peer_text if peer_url else f"unavailable: {peer_text}"
            for workload, jobs in workloads(quick).items():
                jobs = [replace(j, slo_s=slo_scale * critical_path_s(j, decode, prefill)) for j in jobs]
                for policy in POLICIES:
                    row = asyncio.run(_run_gateway(urls, policy, jobs))
                    rows.append({"workload": workload, "policy": policy[0], **row})
                if peer_url is not None:
                    rows.append({"workload": workload, "policy": "vllm-router round_robin (peer)",
                                 **asyncio.run(_run_direct(peer_url, jobs))})  # fmt: skip
    for row in rows:
        print_figures(
            f"{row['workload']}: {row['policy']}", {k: v for k, v in row.items() if k not in ("workload", "policy")}
        )
    if not quick:
        _write_report(figures)
    return figures


def _write_report(figures: dict[str, Any]) -> None:
    lines = [
        "# Live policies on vLLM CPU (`slosched bench live`)",
        "",
        "Two vLLM CPU servers (tiny random-weight models, 2 and 8 layers, one core each) behind the gateway; "
        f"job SLO = {figures['slo_scale']:g} x its critical-path work at the probed per-token times "
        f"{figures['probe_s_per_token']} s. Peer: {figures['peer']}.",
        "",
        "| workload | policy | SLO attainment | mean latency (s) | jobs |",
        "|---|---|---:|---:|---:|",
    ]
    for row in figures["rows"]:
        attained = row["slo_attainment"]
        text = "n/a" if math.isnan(attained) else f"{attained:.2f}"
        lines.append(f"| {row['workload']} | {row['policy']} | {text} | {row['mean_latency_s']:.2f} | {row['jobs']} |")
    _RESULTS.mkdir(parents=True, exist_ok=True)
    (_RESULTS / "live.md").write_text("\n".join(lines) + "\n")
