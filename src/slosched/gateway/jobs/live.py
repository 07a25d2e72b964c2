"""A job as one gateway replica runs it (``LiveJob``), its JSON, and its durable ``JobRecord`` both ways.

Gateway times (``*_s``) are on the replica's monotonic clock; the record carries Unix seconds so another
replica, or this one after a restart, reads the same deadline.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass, field
from typing import Any

from slosched.core.deadline import absolute_deadline_s
from slosched.gateway.calls.call import Call
from slosched.gateway.jobs.body import RowPlan
from slosched.gateway.jobs.store.base import JobRecord

ROWS_STAGE = "rows"


@dataclass(slots=True)
class LiveJob:
    """A job this replica runs. ``stages``: {"name", "status", "reason", "results"} per stage; a relQuery
    has one stage, "rows", whose ``results`` holds one entry per row (None until answered)."""

    id: str
    kind: str
    template: str
    tenant: str
    arrival_s: float
    slo_s: float | None
    deadline_s: float
    priority: float
    created_unix_s: float = 0.0
    status: str = "running"
    reason: str = ""
    finish_s: float | None = None
    last_activity_s: float = 0.0
    active_stages: int = 0
    finished_stages: list[str] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    plan: RowPlan | None = None  # relQuery submission
    task: asyncio.Task[None] | None = None  # relQuery runner
    writer: asyncio.Task[None] | None = None  # the store write in flight
    dirty: bool = False  # changed since the last write started
    checked_s: float = -math.inf  # monotonic time of the last look at the store's record (``JobSync.ended``)

    def latency_s(self) -> float | None:
        return None if self.finish_s is None else self.finish_s - self.arrival_s

    def as_json(self) -> dict[str, Any]:
        latency = self.latency_s()
        slo_met = None
        if latency is not None and self.status == "completed" and math.isfinite(self.deadline_s):
            slo_met = self.arrival_s + latency <= self.deadline_s
        return {
            "id": self.id,
            "kind": self.kind,
            "template": self.template,
            "tenant": self.tenant,
            "status": self.status,
            "reason": self.reason,
            "slo_s": self.slo_s,
            "latency_s": latency,
            "slo_met": slo_met,
            "stages": self.stages,
        }

    def to_record(self, owner: str, now_unix_s: float) -> JobRecord:
        """A snapshot (lists copied: a store may serialise it while the job goes on)."""
        finish_unix = None if self.finish_s is None else self.created_unix_s + (self.finish_s - self.arrival_s)
        state: dict[str, Any] = {"priority": self.priority, "finished_stages": list(self.finished_stages)}
        if self.plan is not None:
            state["submission"] = self.plan.as_state()
        stages = [{**stage, "results": _copied(stage.get("results"))} for stage in self.stages]
        return JobRecord(
            self.id,
            self.tenant,
            self.kind,
            self.template,
            self.status,
            self.reason,
            owner,
            self.created_unix_s,
            now_unix_s,
            self.slo_s,
            finish_unix,
            stages,
            state,
        )


def _copied(results: Any) -> Any:
    return list(results) if isinstance(results, list) else results


def record_json(record: JobRecord) -> dict[str, Any]:
    """The same JSON as ``LiveJob.as_json`` from a stored record (a job of another replica, or finished)."""
    latency = None if record.finish_unix_s is None else record.finish_unix_s - record.created_unix_s
    slo_met = None
    if latency is not None and record.status == "completed" and record.slo_s is not None:
        slo_met = latency <= record.slo_s
    return {
        "id": record.id,
        "kind": record.kind,
        "template": record.template,
        "tenant": record.tenant,
        "status": record.status,
        "reason": record.reason,
        "slo_s": record.slo_s,
        "latency_s": latency,
        "slo_met": slo_met,
        "stages": record.stages,
    }


def from_record(record: JobRecord, now_s: float, now_unix_s: float) -> LiveJob:
    """Resume a stored open job on this replica: its arrival and deadline keep their wall-clock meaning."""
    arrival_s = now_s - max(now_unix_s - record.created_unix_s, 0.0)
    state = record.state
    job = LiveJob(
        id=record.id,
        kind=record.kind,
        template=record.template,
        tenant=record.tenant,
        arrival_s=arrival_s,
        slo_s=record.slo_s,
        deadline_s=absolute_deadline_s(arrival_s, record.slo_s),
        priority=float(state.get("priority", 0.0)),
        created_unix_s=record.created_unix_s,
        last_activity_s=now_s,
        finished_stages=list(state.get("finished_stages", [])),
        stages=[dict(stage) for stage in record.stages],
    )
    submission = state.get("submission")
    if submission is not None:
        job.plan = RowPlan(
            submission["template"], submission["rows"], submission["params"], submission.get("order", "table")
        )
    for stage in job.stages:  # a workflow stage in flight when the replica stopped: its calls are lost
        if stage.get("status") == "running" and record.kind == "workflow":
            stage.update(status="failed", reason="replica_restarted", results=[])
    return job


def call_result(call: Call, status: int, body: bytes) -> dict[str, Any]:
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
        "outcome": call.outcome,
        "reason": call.reason,
        "status": status,
        "text": text,
        "output_tokens": call.output_tokens,
        "latency_s": latency,
        "backend": call.backend,
        "error": error,
        "prompt_tokens": call.request.prompt_tokens,
    }
