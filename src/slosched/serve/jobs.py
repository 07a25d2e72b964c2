"""The job API: workflows (stages posted one at a time by the client) and relQueries (rows + template).

A job carries an end-to-end SLO; its deadline flows into every call it makes: when a stage is released the
configured job policy (``policies/job``, e.g. ``deadline`` or ``stage-budget``) sets each call's
``budget_s``/``deadline_s``/``priority`` through a ``JobView`` (the submission and the stages finished so
far, never the stages still to come), and the engine ordering/admission on the per-instance queues and
vLLM's own priority read them.

Invariant: every accepted job ends in exactly one terminal state — ``completed`` (client completed it, a
final stage finished, or every relQuery row answered), ``failed`` (a call of a stage failed), or
``cancelled`` (client cancelled, or no activity for ``timeouts.job_idle_s``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slosched.core.request import Outcome
from slosched.core.views import JobView
from slosched.serve.calls import CHAT, COMPLETIONS, Call, HttpError, SloHeaders, bad_request, parse_call
from slosched.serve.dispatcher import Dispatcher
from slosched.serve.tuning import observed_job

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_MAX_ROWS = 10_000
_MAX_CALLS_PER_STAGE = 256
KINDS = ("workflow", "relquery")


@dataclass(slots=True)
class LiveJob:
    """A job as the gateway tracks it (times on the gateway clock)."""

    id: str
    kind: str
    template: str
    tenant: str
    arrival_s: float
    slo_s: float | None
    deadline_s: float
    priority: float
    status: str = "running"
    reason: str = ""
    finish_s: float | None = None
    last_activity_s: float = 0.0
    active_stages: int = 0
    finished_stages: list[str] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def as_json(self) -> dict[str, Any]:
        latency = None if self.finish_s is None else self.finish_s - self.arrival_s
        slo_met = None
        if self.finish_s is not None and self.status == "completed" and math.isfinite(self.deadline_s):
            slo_met = self.finish_s <= self.deadline_s
        return {
            "id": self.id, "kind": self.kind, "template": self.template, "tenant": self.tenant,
            "status": self.status, "reason": self.reason, "slo_s": self.slo_s, "latency_s": latency,
            "slo_met": slo_met, "stages": self.stages,
        }  # fmt: skip


def _number(body: Mapping[str, Any], name: str, default: float | None, low: float = 0.0) -> float | None:
    value = body.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= low:
        raise bad_request(name, f"expected a number > {low:g}, got {value!r}")
    return float(value)


def _string(body: Mapping[str, Any], name: str, default: str, max_len: int = 256) -> str:
    value = body.get(name, default)
    if not isinstance(value, str) or len(value) > max_len:
        raise bad_request(name, f"expected a string of at most {max_len} characters, got {value!r}")
    return value


def fill_template(template: str, row: Any, index: int) -> str:
    """``{column}`` placeholders only (no attribute or index lookups: a template cannot reach objects)."""
    if not isinstance(row, dict):
        raise bad_request(f"rows[{index}]", "expected an object of column values")

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in row:
            raise bad_request(f"rows[{index}]", f"missing column {name!r} used by the template")
        cell = row[name]
        return cell if isinstance(cell, str) else json.dumps(cell)

    return _PLACEHOLDER.sub(value, template)


def _result(call: Call, status: int, body: bytes) -> dict[str, Any]:
    text: str | None = None
    error: str | None = None
    try:
        payload = json.loads(body)
        if status >= 400:  # vLLM: {"error": {"message": ...}} or {"object": "error", "message": ...}
            error = str((payload.get("error") or payload).get("message", ""))[:500]
        else:
            choice = payload["choices"][0]
            text = choice.get("text") if "text" in choice else (choice.get("message") or {}).get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        text = None
    latency = None if call.finish_s is None else call.finish_s - call.request.arrival_s
    return {
        "outcome": call.outcome, "reason": call.reason, "status": status, "text": text,
        "output_tokens": call.output_tokens, "latency_s": latency, "backend": call.backend, "error": error,
        "prompt_tokens": call.request.prompt_tokens,
    }  # fmt: skip


class JobManager:
    """Creates jobs, runs their stages through the dispatcher, reaps idle ones."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.config = dispatcher.config
        self.jobs: dict[str, LiveJob] = {}
        self._ids = itertools.count()

    def get(self, job_id: str) -> LiveJob:
        job = self.jobs.get(job_id)
        if job is None:
            raise HttpError(404, "not_found", f"job {job_id!r} not found")
        return job

    def create(self, body: Mapping[str, Any]) -> LiveJob:
        kind = body.get("kind", "workflow")
        if kind not in KINDS:
            raise bad_request("kind", f"expected one of {list(KINDS)}, got {kind!r}")
        slo_s = _number(body, "slo_s", None)
        priority = _number(body, "priority", 0.0, low=-math.inf) or 0.0
        self._evict()
        if sum(job.status == "running" for job in self.jobs.values()) >= self.config.max_jobs:
            raise HttpError(429, "too_many_jobs", "too many running jobs", 1.0)
        now = self.dispatcher.clock()
        job = LiveJob(
            id=f"job-{next(self._ids)}",
            kind=kind,
            template=_string(body, "template", "", max_len=100_000),
            tenant=_string(body, "tenant", "default", max_len=128),
            arrival_s=now,
            slo_s=slo_s,
            deadline_s=now + slo_s if slo_s is not None else math.inf,
            priority=priority,
            last_activity_s=now,
        )
        if kind == "relquery":
            calls = self._relquery_calls(job, body)
            self.jobs[job.id] = job
            job.task = asyncio.create_task(self._run_relquery(job, calls))
        else:
            self.jobs[job.id] = job
        return job

    def _relquery_calls(self, job: LiveJob, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        rows = body.get("rows")
        if not isinstance(rows, list) or not rows or len(rows) > _MAX_ROWS:
            raise bad_request("rows", f"expected a list of 1..{_MAX_ROWS} row objects")
        if not job.template:
            raise bad_request("template", "a relquery needs a prompt template with {column} placeholders")
        extra = body.get("params", {})
        if not isinstance(extra, dict):
            raise bad_request("params", "expected an object of OpenAI fields applied to every row's call")
        return [{**extra, "prompt": fill_template(job.template, row, index)} for index, row in enumerate(rows)]

    async def _run_relquery(self, job: LiveJob, calls: list[dict[str, Any]]) -> None:
        try:
            results = await self.run_stage(job, "rows", calls)
            failed = any(result["outcome"] != Outcome.COMPLETED.value for result in results)
            self.finish(job, "failed" if failed else "completed", "a row failed" if failed else "")
        except HttpError as error:
            self.finish(job, "failed", error.message)
        except asyncio.CancelledError:
            self.finish(job, "cancelled", "gateway shutting down")
            raise

    async def post_stage(self, job_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Run one workflow stage (its calls in parallel) and return their results."""
        job = self.get(job_id)
        if job.kind != "workflow":
            raise HttpError(409, "wrong_kind", f"job {job_id!r} is a {job.kind}; stages are for workflows")
        if job.status != "running":
            raise HttpError(409, "job_finished", f"job {job_id!r} is {job.status}")
        name = _string(body, "name", f"stage-{len(job.stages)}", max_len=128)
        calls = body.get("calls")
        if not isinstance(calls, list) or not 1 <= len(calls) <= _MAX_CALLS_PER_STAGE:
            raise bad_request("calls", f"expected a list of 1..{_MAX_CALLS_PER_STAGE} call objects")
        final = body.get("final", False)
        if not isinstance(final, bool):
            raise bad_request("final", f"expected true or false, got {final!r}")
        results = await self.run_stage(job, name, calls)
        failed = [r for r in results if r["outcome"] != Outcome.COMPLETED.value or r["status"] >= 400]
        if failed:
            self.finish(job, "failed", f"stage {name!r}: {failed[0]['reason']}")
        elif final:
            self.finish(job, "completed", "")
        return {"job": job.as_json(), "stage": name, "results": results}

    async def run_stage(self, job: LiveJob, name: str, bodies: list[Any]) -> list[dict[str, Any]]:
        dispatcher = self.dispatcher
        now = dispatcher.clock()
        slo = SloHeaders(tenant=job.tenant, priority=job.priority, job_id=job.id, stage=name)
        calls: list[Call] = []
        for index, body in enumerate(bodies):
            if not isinstance(body, dict):
                raise bad_request(f"calls[{index}]", "expected an object with 'prompt' or 'messages'")
            path = CHAT if "messages" in body else COMPLETIONS
            call = parse_call(path, {**body, "stream": False}, slo, now, self.config.default_max_tokens)
            call.request.template = job.template if job.kind == "workflow" else "relquery"
            call.request.job_arrival_s = job.arrival_s
            call.request.deadline_s = job.deadline_s
            calls.append(call)
        for call in calls:
            dispatcher.accept(call)
        requests = [call.request for call in calls]
        view = JobView(job.id, job.kind, job.template, job.arrival_s, job.slo_s or math.inf, job.deadline_s,
                       name, tuple(job.finished_stages))  # fmt: skip
        dispatcher.job_policy.on_stage_released(view, requests, now)
        job.active_stages += 1
        stage: dict[str, Any] = {"name": name, "results": None}
        job.stages.append(stage)
        try:
            results = await asyncio.gather(*(self._one(call) for call in calls))
        finally:
            job.active_stages -= 1
            job.last_activity_s = dispatcher.clock()
        stage["results"] = list(results)
        job.finished_stages.append(name)
        return list(results)

    async def _one(self, call: Call) -> dict[str, Any]:
        try:
            status, body = await self.dispatcher.complete(call)
        except HttpError as error:
            outcome = Outcome.REJECTED if error.status in (429, 503) else Outcome.FAILED
            self.dispatcher.finish(call, outcome, error.code)
            return _result(call, error.status, b"")
        except asyncio.CancelledError:
            self.dispatcher.finish(call, Outcome.CANCELLED, "cancelled")
            raise
        return _result(call, status, body)

    def finish(self, job: LiveJob, status: str, reason: str) -> bool:
        """The job's single terminal transition; returns False when it had already ended."""
        if job.status != "running":
            return False
        job.status, job.reason = status, reason
        job.finish_s = self.dispatcher.clock()
        metrics = self.dispatcher.metrics
        metrics.jobs.labels(job.kind, status).inc()
        if status == "completed":
            metrics.job_latency.labels(job.kind).observe(job.finish_s - job.arrival_s)
            tuner = self.dispatcher.alpha_tuner
            if tuner is not None and job.kind == "workflow":
                observed = observed_job(job.id, job.template, job.arrival_s, job.slo_s, job.stages)
                if observed is not None:
                    tuner.record(observed, job.finish_s - job.arrival_s)
            if math.isfinite(job.deadline_s):
                metrics.job_slo.labels(str(job.finish_s <= job.deadline_s).lower()).inc()
        return True

    def cancel(self, job_id: str) -> LiveJob:
        job = self.get(job_id)
        if self.finish(job, "cancelled", "cancelled by client") and job.task is not None:
            job.task.cancel()
        return job

    async def reap_idle(self) -> None:
        """Cancel workflows with no stage running and no activity for ``timeouts.job_idle_s``."""
        now = self.dispatcher.clock()
        for job in list(self.jobs.values()):
            idle = now - job.last_activity_s > self.config.timeouts.job_idle_s
            if idle and job.status == "running" and job.kind == "workflow" and not job.active_stages:
                self.finish(job, "cancelled", "idle timeout")

    def _evict(self) -> None:
        """Keep at most ``max_jobs`` finished jobs (oldest dropped first) so memory stays bounded."""
        finished = [job for job in self.jobs.values() if job.status != "running"]
        for job in finished[: max(len(finished) - self.config.max_jobs, 0)]:
            del self.jobs[job.id]

    async def shutdown(self) -> None:
        for job in list(self.jobs.values()):
            if job.status == "running":
                self.cancel(job.id)
        tasks = [job.task for job in self.jobs.values() if job.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
