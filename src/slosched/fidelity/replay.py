"""Replay a job trace directly against one OpenAI-compatible engine and record what really happened.

Each job starts at its trace arrival time (open loop); each stage is sent when the stages it depends on
finished (a tool stage sleeps its duration), like the simulator's job layer with no gateway in between.
Every call is one streamed ``/v1/completions`` request whose prompt is token ids of exactly
``input_tokens`` length (``tuning.prompts``: the first ``prefix_tokens`` derived from ``prefix_key``, so
calls that share a prefix in the trace share it in the engine's prefix cache too; the rest unique per call
and per replay, so nothing cached by an earlier replay is hit) with
``ignore_eos`` and ``max_tokens`` = the call's output length. The result is a ``RunResult`` with the same
records the simulator produces, timed on the client's monotonic clock from the replay start, so real and
simulated runs are summarized by the same code.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from slosched.core.job import CallSpec, JobSpec
from slosched.core.records import JobRecord, RequestRecord, RunResult
from slosched.core.request import Outcome
from slosched.tuning.openai_client import EndpointError, aiter_stream_events
from slosched.workloads.prompts import prompt_ids

_CALL_TIMEOUT_S = 600.0


@dataclass(slots=True)
class _Replay:
    url: str
    model: str
    salt: int = 0
    start: float = 0.0
    counter: int = 0
    requests: list[RequestRecord] = field(default_factory=list)
    jobs: list[JobRecord] = field(default_factory=list)

    def now(self) -> float:
        return time.perf_counter() - self.start

    async def call(self, http: httpx.AsyncClient, job: JobSpec, stage: str, call: CallSpec) -> bool:
        self.counter += 1
        record = RequestRecord(
            f"{job.id}/{stage}/{self.counter}",
            job.id,
            stage,
            "engine",
            self.now(),
            call.input_tokens,
            0,
            Outcome.FAILED,
        )
        self.requests.append(record)
        prompt = prompt_ids(call.input_tokens, self.salt + self.counter, call.prefix_key, call.prefix_tokens)
        body = {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": call.output_tokens,
            "ignore_eos": True,
            "stream": True,
            "temperature": 0.0,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        chunks, reported = 0, None
        try:
            async with http.stream("POST", "/v1/completions", json=body) as response:
                if response.status_code != 200:
                    record.reason = f"HTTP {response.status_code}: {(await response.aread())[:200]!r}"
                    return False
                async for event in aiter_stream_events(response):
                    has_token, usage = _read_chunk(event)
                    if has_token:
                        chunks += 1
                        if math.isnan(record.first_token_s):
                            record.first_token_s = self.now()
                    if usage is not None:
                        reported = usage
        except (httpx.HTTPError, EndpointError) as error:  # EndpointError: an error event in the stream
            record.reason = f"{type(error).__name__}: {error}"[:300]
            return False
        record.finish_s = self.now()
        # The usage chunk is exact; counting chunks undercounts when the server packs tokens into one.
        record.output_tokens = reported if reported is not None else chunks
        record.outcome = Outcome.COMPLETED if record.output_tokens > 0 else Outcome.FAILED
        return record.outcome is Outcome.COMPLETED

    async def job(self, http: httpx.AsyncClient, job: JobSpec) -> None:
        await asyncio.sleep(max(0.0, job.arrival_s - self.now()))
        now = self.now()
        record = JobRecord(job.id, job.kind, job.template, now, Outcome.FAILED, job.num_calls, math.inf, math.nan)
        self.jobs.append(record)
        deps = job.dependencies()
        done: dict[str, asyncio.Event] = {stage.name: asyncio.Event() for stage in job.stages}
        ok = True

        async def run(stage_index: int) -> None:
            nonlocal ok
            stage = job.stages[stage_index]
            for parent in deps[stage.name]:
                await done[parent].wait()
            if stage.tool_duration_s > 0:
                await asyncio.sleep(stage.tool_duration_s)
            results = await asyncio.gather(*(self.call(http, job, stage.name, call) for call in stage.calls))
            ok = ok and all(results)
            done[stage.name].set()

        await asyncio.gather(*(run(index) for index in range(len(job.stages))))
        record.finish_s = self.now()
        record.outcome = Outcome.COMPLETED if ok else Outcome.FAILED


def _read_chunk(event: dict[str, Any]) -> tuple[bool, int | None]:
    """``(carries a token, completion_tokens of the final usage chunk or None)`` of one streamed chunk."""
    usage = event.get("usage")
    completion = int(usage["completion_tokens"]) if isinstance(usage, dict) and "completion_tokens" in usage else None
    return bool(event.get("choices")), completion


async def replay_async(url: str, jobs: Sequence[JobSpec], model: str = "tiny") -> RunResult:
    """Replay ``jobs`` (arrival times relative to now) and return the measured records."""
    width = sum(job.num_calls for job in jobs) + 8
    limits = httpx.Limits(max_connections=width, max_keepalive_connections=64)
    timeout = httpx.Timeout(_CALL_TIMEOUT_S, connect=10.0)
    replay = _Replay(url, model, salt=secrets.randbits(40) << 20)  # never the ids of an earlier replay
    async with httpx.AsyncClient(base_url=url.rstrip("/"), limits=limits, timeout=timeout) as http:
        replay.start = time.perf_counter()
        await asyncio.gather(*(replay.job(http, job) for job in sorted(jobs, key=lambda j: j.arrival_s)))
    end = max((job.finish_s for job in replay.jobs), default=0.0)
    return RunResult("real", 0, end, replay.requests, replay.jobs)


def replay(url: str, jobs: Sequence[JobSpec], model: str = "tiny") -> RunResult:
    return asyncio.run(replay_async(url, jobs, model))
