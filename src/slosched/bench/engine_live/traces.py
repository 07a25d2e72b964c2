"""Traces and a replay client for ``bench engine-live``: jobs of LLM calls replayed against one vLLM server
with the plugin's per-request metadata (``vllm_xargs``).

A job is stages of parallel calls (a chat turn: one stage, one call; a workflow: a chain of stages; a
relQuery: one stage, one call per row). Output lengths are fixed (``ignore_eos`` + ``max_tokens``); the
client's *prediction* sent to the engine is the true length times log-normal noise (sigma 0.3), never the
truth. Job SLOs are a multiple of the job's no-contention latency estimated from the measured speed
profile (``ServerSpeed``). Deterministic by seed (the network and the engine are not).
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from slosched import contract as c
from slosched.core.records import RequestRecord
from slosched.core.request import Outcome
from slosched.metrics.serving import serving_stats

_WORDS = ("alpha", "brown", "quick", "lazy", "model", "token", "batch", "queue", "deadline", "engine", "cache")


@dataclass(slots=True, frozen=True)
class ServerSpeed:
    """Measured: per-request decode speed (tokens/s) at concurrency 1 and at the server's slot count."""

    solo_tps: float
    full_tps: float
    slots: int


@dataclass(slots=True)
class LiveCall:
    prompt_words: int
    max_tokens: int


@dataclass(slots=True)
class LiveJob:
    id: str
    kind: str
    arrival_s: float
    stages: list[list[LiveCall]]
    slo_s: float = 0.0
    latency_s: float | None = None
    tokens: int = 0
    errors: int = 0
    # Each call as replayed (seconds from the replay's start; no first-token time: calls are not streamed).
    calls: list[RequestRecord] = field(default_factory=list)


def prompt(words: int, seed: int) -> str:
    """A prompt of ``words`` distinct-ish words; no two calls share a prefix (no prefix-cache effects)."""
    return f"{seed} " + " ".join(f"{_WORDS[(seed + 7 * i) % len(_WORDS)]}{(seed * 31 + i) % 97}" for i in range(words))


def solo_latency_s(job: LiveJob, speed: ServerSpeed) -> float:
    """No-contention latency estimate: each stage's calls in waves of ``slots``, each at the speed of
    that concurrency (interpolated between solo and full in 1/L, the shape continuous batching has)."""
    total = 0.0
    for stage in job.stages:
        width = min(len(stage), speed.slots)
        inverse = 1 / speed.solo_tps + (1 / speed.full_tps - 1 / speed.solo_tps) * (width - 1) / max(speed.slots - 1, 1)
        waves = math.ceil(len(stage) / speed.slots)
        total += waves * max(call.max_tokens for call in stage) * inverse + 0.02
    return total


def chat_trace(rng: np.random.Generator, num: int, rate: float, speed: ServerSpeed) -> list[LiveJob]:
    """Single calls, mixed deadlines: 30% tight (2x their solo latency), 70% loose (8x)."""
    arrivals = np.cumsum(rng.exponential(1.0 / rate, num))
    jobs = []
    for i in range(num):
        call = LiveCall(int(rng.integers(10, 120)), int(rng.integers(16, 160)))
        job = LiveJob(f"chat{i}", "single", float(arrivals[i]), [[call]])
        job.slo_s = (2.0 if rng.random() < 0.3 else 8.0) * solo_latency_s(job, speed)
        jobs.append(job)
    return jobs


def workflow_trace(rng: np.random.Generator, num: int, rate: float, speed: ServerSpeed) -> list[LiveJob]:
    """Chains of 2-4 stages (1-2 parallel calls each), SLO 3x the solo latency."""
    arrivals = np.cumsum(rng.exponential(1.0 / rate, num))
    jobs = []
    for i in range(num):
        stages = [
            [LiveCall(int(rng.integers(20, 100)), int(rng.integers(16, 96))) for _ in range(int(rng.integers(1, 3)))]
            for _ in range(int(rng.integers(2, 5)))
        ]
        job = LiveJob(f"wf{i}", "workflow", float(arrivals[i]), stages)
        job.slo_s = 3.0 * solo_latency_s(job, speed)
        jobs.append(job)
    return jobs


def relquery_trace(rng: np.random.Generator, num: int, gap_s: float, speed: ServerSpeed) -> list[LiveJob]:
    """relQueries of mixed sizes (3-40 rows of one template), SLO 3x the solo latency."""
    jobs = []
    for i in range(num):
        rows = int(rng.choice([3, 5, 8, 20, 40]))
        words, tokens = int(rng.integers(20, 60)), int(rng.integers(16, 48))
        job = LiveJob(f"rq{i}", "relquery", i * gap_s, [[LiveCall(words, tokens) for _ in range(rows)]])
        job.slo_s = 3.0 * solo_latency_s(job, speed)
        jobs.append(job)
    return jobs


@dataclass(slots=True)
class Replay:
    url: str
    start_unix: float = 0.0
    start_mono: float = 0.0
    noise: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    counter: int = 0

    def xargs(self, job: LiveJob, stage: int, call: LiveCall, stage_start: float) -> dict[str, Any]:
        deadline = self.start_unix + job.arrival_s + job.slo_s
        remaining = [max(c.max_tokens for c in s) for s in job.stages[stage:]]
        budget = max((deadline - (self.start_unix + stage_start)) * remaining[0] / sum(remaining), 0.01)
        predicted = max(1.0, call.max_tokens * float(self.noise.lognormal(0.0, 0.3)))
        meta: dict[str, Any] = {
            c.XARG_JOB_ID: job.id,
            c.XARG_STAGE: f"s{stage}",
            c.XARG_TEMPLATE: job.kind,
            c.XARG_DEADLINE_UNIX_S: round(deadline, 3),
            c.XARG_BUDGET_S: round(budget, 3),
            c.XARG_PREDICTED_TOKENS: round(predicted, 1),
            c.XARG_JOB_ARRIVAL_UNIX_S: round(self.start_unix + job.arrival_s, 3),
        }
        if job.kind == "relquery":
            meta[c.XARG_RELQUERY_ID] = job.id
            meta[c.XARG_RELQUERY_SIZE] = len(job.stages[0])
        return meta

    async def call(self, client: httpx.AsyncClient, job: LiveJob, stage: int, call: LiveCall) -> None:
        self.counter += 1
        # Signed as the gateway signs what it forwards: the plugin trusts no unsigned field when it has a key
        # (``start_plugin_servers`` shares one); vLLM's request id embeds the X-Request-Id header.
        request_id = f"engine-live-{self.counter}"
        xargs = self.xargs(job, stage, call, time.monotonic() - self.start_mono)
        key = c.xargs_key()
        body = {
            "model": "tiny",
            "prompt": prompt(call.prompt_words, self.counter),
            "max_tokens": call.max_tokens,
            "ignore_eos": True,
            "vllm_xargs": xargs if key is None else c.sign_xargs(xargs, request_id, key),
        }
        sent_s = time.monotonic() - self.start_mono
        usage: dict[str, Any] = {}
        try:
            headers = {c.HEADER_REQUEST_ID: request_id}
            response = await client.post(f"{self.url}/v1/completions", json=body, headers=headers, timeout=600)
            response.raise_for_status()
            usage = response.json()["usage"]
            job.tokens += int(usage["completion_tokens"])
        except (httpx.HTTPError, KeyError, ValueError):
            job.errors += 1
        job.calls.append(_call_record(job, stage, request_id, sent_s, time.monotonic() - self.start_mono, usage))

    async def job(self, client: httpx.AsyncClient, job: LiveJob) -> None:
        await asyncio.sleep(max(0.0, job.arrival_s - (time.monotonic() - self.start_mono)))
        for index, stage in enumerate(job.stages):
            await asyncio.gather(*(self.call(client, job, index, call) for call in stage))
        job.latency_s = time.monotonic() - self.start_mono - job.arrival_s

    async def run(self, jobs: list[LiveJob]) -> None:
        self.start_unix, self.start_mono = time.time(), time.monotonic()
        limits = httpx.Limits(max_connections=512, max_keepalive_connections=64)
        async with httpx.AsyncClient(limits=limits) as client:
            await asyncio.gather(*(self.job(client, job) for job in jobs))


def _call_record(
    job: LiveJob, stage: int, request_id: str, sent_s: float, done_s: float, usage: dict[str, Any]
) -> RequestRecord:
    """A replayed call as the simulator records a request (``usage`` empty: it failed)."""
    return RequestRecord(
        id=request_id,
        job_id=job.id,
        stage=f"s{stage}",
        instance="engine",
        arrival_s=sent_s,
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        output_tokens=int(usage.get("completion_tokens", 0)),
        outcome=Outcome.COMPLETED if usage else Outcome.FAILED,
        finish_s=done_s,
        deadline_s=job.arrival_s + job.slo_s,
    )


def serving(jobs: list[LiveJob]) -> dict[str, float]:
    """The replayed calls in vLLM's serving terms (``metrics.serving.serving_stats``, as ``compare``): token
    throughput, request goodput (calls within their job's deadline), end-to-end latency; TTFT, TPOT and ITL
    are NaN, since the calls are not streamed. The duration runs from the first job's arrival to the last
    call's end."""
    records = [record for job in jobs for record in job.calls]
    ends = [record.finish_s for record in records if record.outcome is Outcome.COMPLETED]
    duration = max(ends) - min(job.arrival_s for job in jobs) if ends else math.nan
    return serving_stats(records, duration).to_json_dict()


def summarize(jobs: list[LiveJob]) -> dict[str, float]:
    done = [job for job in jobs if job.latency_s is not None and not job.errors]
    met = [job for job in done if job.latency_s is not None and job.latency_s <= job.slo_s]
    latencies = [job.latency_s for job in done if job.latency_s is not None]
    return {
        "jobs": len(jobs),
        "errors": sum(job.errors for job in jobs),
        "slo_attainment": len(met) / len(jobs) if jobs else 0.0,
        "mean_latency_s": float(np.mean(latencies)) if latencies else float("nan"),
        "p90_latency_s": float(np.percentile(latencies, 90)) if latencies else float("nan"),
    }
