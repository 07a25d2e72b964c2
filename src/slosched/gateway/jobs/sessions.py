"""Jobs named by other stacks' request fields (``calls/dialects``): a program or session is a slosched job.

A plain OpenAI call that names a program (vllm-router), a session (Dynamo, the coding agents' headers) or a
task joins that job here, with no ``POST /v1/jobs`` first: the first call opens it, and its end-to-end
deadline (``deadline_seconds``) counts from that first call, so every later call of the job is scheduled
against the same absolute deadline (``core.deadline.absolute_deadline_s``, the one rule). A child program
joins its parent's job (its root's, transitively), so an agent's subagents share one deadline; each program
keeps its own KV-affinity key (``Request.session_id``).

Jobs are per tenant: the key is (tenant, id), so another tenant reusing a session id opens its own job and
never sees, extends or reads this one; the id the engine sees is qualified by the tenant for the same reason
(two tenants' "session-1" are two jobs there too). ``GET /v1/jobs/{id}`` shows a job to its tenant.

Bounded: at most ``max_jobs`` (least recently used evicted first) and dropped after ``idle_s`` without a
call, or ``kv_retention_ttl_seconds`` when the client asked for longer. Not durable: a replica restart
starts these jobs afresh (the job API's jobs are the durable ones).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from slosched.core.deadline import absolute_deadline_s
from slosched.gateway.calls.call import Call, SloHeaders

MAX_PROGRAMS = 256  # per job, in its JSON: the tree is for reading, not for a client to grow without end


@dataclass(slots=True)
class SessionJob:
    id: str
    tenant: str
    dialect: str
    arrival_s: float  # the first call's
    slo_s: float | None
    deadline_s: float
    last_s: float
    calls: int = 0
    kv_retention_s: float | None = None
    programs: dict[str, str | None] = field(default_factory=dict)  # program -> its parent (None: the root)

    def as_json(self, now_s: float) -> dict[str, Any]:
        remaining = self.deadline_s - now_s if math.isfinite(self.deadline_s) else None
        return {
            "id": self.id,
            "kind": "session",
            "dialect": self.dialect,
            "tenant": self.tenant,
            "status": "running",
            "slo_s": self.slo_s,
            "deadline_in_s": remaining,
            "calls": self.calls,
            "kv_retention_s": self.kv_retention_s,
            "programs": dict(self.programs),
        }


class SessionJobs:
    def __init__(self, idle_s: float, max_jobs: int = 65_536) -> None:
        self.idle_s = idle_s
        self.max_jobs = max_jobs
        self._jobs: OrderedDict[tuple[str, str], SessionJob] = OrderedDict()
        self._program_job: dict[tuple[str, str], str] = {}  # (tenant, program) -> its job id

    def __len__(self) -> int:
        return len(self._jobs)

    def get(self, tenant: str, job_id: str, now_s: float) -> SessionJob | None:
        self._expire(now_s)
        return self._jobs.get((tenant, job_id))

    def attach(self, call: Call, slo: SloHeaders, now_s: float) -> SessionJob | None:
        """Put ``call`` in its job (opened by this call when new): the job's arrival and deadline; only a
        deadline from ``x-slo-deadline-ms`` (slosched's own header wins) keeps its per-call meaning. None
        when ``slo`` names no dialect job."""
        if slo.dialect is None:
            return None
        self._expire(now_s)
        tenant = slo.tenant
        job_id = self._job_of(tenant, slo)
        if job_id is None:
            return None
        job = self._open(tenant, job_id, slo, now_s)
        job.calls += 1
        job.last_s = now_s
        if slo.kv_retention_s is not None:
            job.kv_retention_s = max(job.kv_retention_s or 0.0, slo.kv_retention_s)
        self._note_program(tenant, job, slo)
        request = call.request
        request.job_id = f"{tenant}/{job_id}"  # per tenant in the engine too (see the module docstring)
        request.job_arrival_s = job.arrival_s
        if slo.deadline_from_job or slo.deadline_ms is None:
            request.deadline_s = job.deadline_s  # a call that states no deadline of its own runs to its job's
        return job

    def _job_of(self, tenant: str, slo: SloHeaders) -> str | None:
        """The named job; else the parent's job (a subagent joins its root's); else the program's own."""
        if slo.job_id is not None:
            return slo.job_id
        if slo.parent_id is not None:
            return self._program_job.get((tenant, slo.parent_id), slo.parent_id)
        return slo.program_id

    def _open(self, tenant: str, job_id: str, slo: SloHeaders, now_s: float) -> SessionJob:
        key = (tenant, job_id)
        job = self._jobs.get(key)
        if job is None:
            slo_s = slo.deadline_ms / 1000.0 if slo.deadline_from_job and slo.deadline_ms is not None else None
            job = SessionJob(job_id, tenant, slo.dialect or "", now_s, slo_s, absolute_deadline_s(now_s, slo_s), now_s)
            self._jobs[key] = job
            while len(self._jobs) > self.max_jobs:
                self._drop(*self._jobs.popitem(last=False))
        else:
            self._jobs.move_to_end(key)
            if job.slo_s is None and slo.deadline_from_job and slo.deadline_ms is not None:
                # The first call to state a deadline sets it, still counted from the job's first call.
                job.slo_s = slo.deadline_ms / 1000.0
                job.deadline_s = absolute_deadline_s(job.arrival_s, job.slo_s)
        return job

    def _note_program(self, tenant: str, job: SessionJob, slo: SloHeaders) -> None:
        program = slo.program_id
        if program is None or program == job.id:
            return
        if program in job.programs or len(job.programs) < MAX_PROGRAMS:
            job.programs[program] = slo.parent_id
            self._program_job[(tenant, program)] = job.id  # only what ``_drop`` will find again

    def _expire(self, now_s: float) -> None:
        """Drop jobs idle past their retention, oldest first (the dict is in last-use order). A job kept
        longer (``kv_retention_s``) at the head delays those behind it; ``max_jobs`` bounds memory anyway."""
        while self._jobs:
            key, job = next(iter(self._jobs.items()))
            keep_s = max(self.idle_s, job.kv_retention_s or 0.0)
            if now_s - job.last_s <= keep_s:
                return
            del self._jobs[key]
            self._drop(key, job)

    def _drop(self, key: tuple[str, str], job: SessionJob) -> None:
        for program in job.programs:
            self._program_job.pop((key[0], program), None)
