"""The job API: workflows (stages posted one at a time by the client) and relQueries (rows + template).

A job carries an end-to-end SLO; its deadline flows into every call it makes: when a stage is released the
configured job policy (``policies/job``, e.g. ``deadline`` or ``stage-budget``) sets each call's
``budget_s``/``deadline_s``/``priority`` through a ``JobView`` (the submission and the stages finished so
far, never the stages still to come), and the engine ordering/admission on the per-instance queues and
vLLM's own priority read them. With fair sharing on, a stage's calls enter the queues within their tenant's
share (``pacing.py``), a relQuery's rows likewise (``rows.py``).

Jobs belong to a tenant: every operation takes the caller's ``Principal``, and another tenant's job
answers 404 exactly like a missing one; ids are unguessable. Jobs are durable (``serve.store``): a record
is written at creation, as stages and rows finish, and at the end; a restarted replica resumes its open
jobs and claims those of replicas whose heartbeat stopped (``sync.py``). Finished jobs leave memory.

Invariant: every accepted job ends in exactly one terminal state — ``completed`` (client completed it, a
final stage finished, or every relQuery row answered), ``failed`` (a call of a stage failed), or
``cancelled`` (client cancelled, or no activity for ``timeouts.job_idle_s``). A job open when its replica
stops stays open in the store, for this replica's restart or another replica to take over.
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from slosched.core.deadline import absolute_deadline_s
from slosched.core.request import Outcome
from slosched.core.views import JobView
from slosched.gateway.calls.call import COMPLETIONS, Call, HttpError, SloHeaders, parse_call
from slosched.gateway.dispatch.admission import admit_stage
from slosched.gateway.dispatch.alpha import observed_job
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.jobs.body import MAX_STAGES, RowPlan, parse_job, parse_stage, short, stage_calls
from slosched.gateway.jobs.live import ROWS_STAGE, LiveJob, call_result, record_json
from slosched.gateway.jobs.pacing import within_share
from slosched.gateway.jobs.rows import RowRunner
from slosched.gateway.jobs.sessions import SessionJobs
from slosched.gateway.jobs.store.base import TERMINAL, JobStore
from slosched.gateway.jobs.sync import JobSync
from slosched.gateway.ops.identity import Principal
from slosched.gateway.ops.limits import Lease, TenantLimits

log = logging.getLogger("slosched.gateway")
KINDS = ("workflow", "relquery")


def new_job_id() -> str:
    return "job-" + secrets.token_urlsafe(16)


class JobManager:
    """Creates jobs, runs their stages through the dispatcher, persists them, reaps idle ones."""

    def __init__(
        self, dispatcher: Dispatcher, store: JobStore, replica: str | None = None, wall: Callable[[], float] = time.time
    ) -> None:
        self.dispatcher = dispatcher
        self.config = dispatcher.config
        self.jobs: dict[str, LiveJob] = {}  # running here (finished ones leave once stored)
        # Jobs that plain calls name through other stacks' fields (``sessions.py``), in memory only.
        self.sessions = SessionJobs(self.config.timeouts.job_idle_s)
        self.limits: TenantLimits | None = None  # the gateway's, so stage calls count as direct calls do
        self.max_tokens = max(backend.max_model_len for backend in self.config.backends)
        self.active_relqueries = 0
        self.starting = 0  # relQuery calls created and not yet routed (rows.py)
        replica = replica or self.config.replica or f"{socket.gethostname()}:{self.config.port}"
        self.sync = JobSync(self, store, replica, wall)

    def _check_first_row(self, plan: RowPlan, principal: Principal, now: float) -> None:
        """The rows share their parameters: the first row's call is checked at submission, so a bad model or
        parameter is one 4xx on the submission, not one failed call per row."""
        if not plan.rows:
            return
        slo = SloHeaders(tenant=principal.tenant)
        try:
            parse_call(COMPLETIONS, plan.body(0), slo, now, self.config.default_max_tokens, self.dispatcher.models)
        except HttpError as error:
            raise HttpError(error.status, error.code, f"rows[0]: {error.message}", error.retry_after_s) from None

    # --- the API ------------------------------------------------------------------------------------------
    async def create(self, body: Mapping[str, Any], principal: Principal) -> dict[str, Any]:
        spec = parse_job(body, self.max_tokens)
        if spec.tenant is not None and spec.tenant != principal.tenant:
            raise HttpError(403, "forbidden", f"tenant: jobs run as the caller's tenant, not {short(spec.tenant)}")
        stored_open = await self.sync.count_open(principal.tenant)
        running = [job for job in self.jobs.values() if job.status == "running"]
        if len(running) >= self.config.max_jobs:
            raise HttpError(429, "too_many_jobs", "too many running jobs", 1.0)
        limit = principal.max_jobs if principal.max_jobs is not None else self.config.max_jobs_per_tenant
        if max(stored_open, sum(job.tenant == principal.tenant for job in running)) >= limit:
            raise HttpError(429, "too_many_jobs", f"tenant {principal.tenant!r} has {limit} open jobs", 1.0)
        slo_s = spec.slo_s
        if slo_s is not None and principal.min_slo_s is not None:
            slo_s = max(slo_s, principal.min_slo_s)  # tighter than the operator allows: clamped up
        now = self.dispatcher.clock()
        job = LiveJob(
            id=new_job_id(),
            kind=spec.kind,
            template=spec.template,
            tenant=principal.tenant,
            arrival_s=now,
            slo_s=slo_s,
            deadline_s=absolute_deadline_s(now, slo_s),
            # Lower runs first: a tenant may lower its jobs' priority, never rise above its class.
            priority=max(spec.priority, principal.priority),
            created_unix_s=self.sync.wall(),
            last_activity_s=now,
        )
        if spec.kind == "relquery":
            assert spec.rows is not None
            job.plan = RowPlan(spec.template, spec.rows, spec.params, spec.order)
            self._check_first_row(job.plan, principal, now)
            job.stages.append({"name": ROWS_STAGE, "status": "running", "results": [None] * len(spec.rows)})
        self.jobs[job.id] = job
        try:
            admitted = await self.sync.admit(job, limit)  # the store's count decides, atomically
        except BaseException:
            del self.jobs[job.id]
            raise
        if not admitted:
            del self.jobs[job.id]
            raise HttpError(429, "too_many_jobs", f"tenant {principal.tenant!r} has {limit} open jobs", 1.0)
        if job.kind == "relquery":
            self.start_rows(job)
        return job.as_json()

    async def get(self, job_id: str, principal: Principal) -> dict[str, Any]:
        job = self._live(job_id, principal)
        if job is not None:
            return job.as_json()
        now = self.dispatcher.clock()
        session = self.sessions.get(principal.tenant, job_id, now)
        if session is not None:
            return session.as_json(now)
        record = await self.sync.record(job_id, principal)
        return record_json(record)

    async def cancel(self, job_id: str, principal: Principal) -> dict[str, Any]:
        job = self._live(job_id, principal)
        if job is None:
            return record_json(await self.sync.cancel_elsewhere(job_id, principal))
        if self.finish(job, "cancelled", "cancelled by client") and job.task is not None:
            job.task.cancel()
        await self.sync.settle(job)
        return job.as_json()

    async def complete(self, job_id: str, principal: Principal) -> dict[str, Any]:
        job = await self._here(job_id, principal)
        if job.kind != "workflow" or (job.status != "running" and job.status != "completed"):
            raise HttpError(409, "job_finished", f"job {job.id!r} is {job.status}")
        if job.active_stages:
            raise HttpError(409, "stage_running", f"job {job.id!r} still runs a stage")
        self.finish(job, "completed", "")
        await self.sync.settle(job)
        return job.as_json()

    async def post_stage(self, job_id: str, body: Mapping[str, Any], principal: Principal) -> dict[str, Any]:
        """Run one workflow stage (its calls in parallel) and return their results. The whole stage is
        validated before any call is accepted: a bad call refuses the stage and nothing runs."""
        job = await self._here(job_id, principal)
        if job.kind != "workflow":
            raise HttpError(409, "wrong_kind", f"job {job_id!r} is a {job.kind}; stages are for workflows")
        if await self.ended(job, every_s=0.0):  # cancelled through another replica: no stage starts
            raise HttpError(409, "job_finished", f"job {job_id!r} is {job.status}")
        if len(job.stages) >= MAX_STAGES:
            raise HttpError(409, "too_many_stages", f"a workflow runs at most {MAX_STAGES} stages")
        name, bodies, final, reject = parse_stage(body, f"stage-{len(job.stages)}")
        now = self.dispatcher.clock()
        slo = SloHeaders(tenant=job.tenant, priority=job.priority, job_id=job.id, stage=name)
        models = self.dispatcher.models
        calls = stage_calls(bodies, slo, now, self.config.default_max_tokens, self.max_tokens, models)
        leases = self._admit(principal, calls)
        try:
            results = await self._run_stage(job, name, calls, now, reject)
        finally:
            for lease in leases:
                lease.release()
        failed = [r for r in results if r["outcome"] != Outcome.COMPLETED.value or r["status"] >= 400]
        if failed:
            self.finish(job, "failed", f"stage {name!r}: {failed[0]['reason']}")
        elif final:
            self.finish(job, "completed", "")
        await self.sync.settle(job)
        return {"job": job.as_json(), "stage": name, "results": results}

    def _admit(self, principal: Principal, calls: list[Call]) -> list[Lease]:
        """A stage's calls against the tenant's token rate and concurrency, as direct calls are: all of them
        or none (a refused one releases the leases taken; 429, nothing runs)."""
        leases: list[Lease] = []
        if self.limits is None:
            return leases
        try:
            for call in calls:
                lease = self.limits.admit_call(principal, call.token_cost)
                if lease is not None:
                    leases.append(lease)
        except HttpError:
            for lease in leases:
                lease.release()
            raise
        return leases

    # --- running ------------------------------------------------------------------------------------------
    async def _run_stage(
        self, job: LiveJob, name: str, calls: list[Call], now: float, reject: bool
    ) -> list[dict[str, Any]]:
        dispatcher = self.dispatcher
        for call in calls:
            call.request.template = job.template
            call.request.job_arrival_s = job.arrival_s
            call.request.deadline_s = job.deadline_s
        view = JobView.at_release(job.id, job.kind, job.template, job.arrival_s, job.slo_s, name, job.finished_stages)
        requests = [call.request for call in calls]
        admit_stage(dispatcher, view, requests, now, reject)  # an early 503 refuses the stage before any is accepted
        for call in calls:
            dispatcher.accept(call)
        job.active_stages += 1
        stage: dict[str, Any] = {"name": name, "status": "running", "results": None}
        job.stages.append(stage)
        self.touch(job)  # a stage in flight when this replica dies is reported lost, not silently dropped
        try:
            results = list(await asyncio.gather(*(self.run_call(call, paced=True) for call in calls)))
        finally:
            job.active_stages -= 1
            job.last_activity_s = dispatcher.clock()
        failed = any(r["outcome"] != Outcome.COMPLETED.value or r["status"] >= 400 for r in results)
        stage.update(status="failed" if failed else "completed", results=results)
        job.finished_stages.append(name)
        self.touch(job)
        return results

    def start_rows(self, job: LiveJob) -> None:
        job.task = asyncio.create_task(self._run_relquery(job))

    async def _run_relquery(self, job: LiveJob) -> None:
        try:
            await RowRunner(self, job).run()
            if job.status != "running":
                return  # ended elsewhere meanwhile: its end stands
        except asyncio.CancelledError:
            raise  # cancelled by the client (already terminal) or a shutdown (the job stays open, stored)
        except Exception:
            log.exception("relquery %s failed", job.id)
            self.finish(job, "failed", "internal error")
            return
        results = job.stages[0]["results"]
        failed = any(result is None or result["outcome"] != Outcome.COMPLETED.value for result in results)
        job.stages[0]["status"] = "failed" if failed else "completed"
        self.finish(job, "failed" if failed else "completed", "a row failed" if failed else "")

    async def run_call(self, call: Call, paced: bool = False) -> dict[str, Any]:
        """One accepted call to its terminal outcome (whatever happens) and its result entry; ``paced``: it
        enters the queues within its tenant's fair share (``pacing.py``; a stage call)."""
        try:
            if paced:
                await within_share(self.dispatcher, call.request.tenant, self.config.timeouts.queue_s)
            status, body = await self.dispatcher.complete(call)
        except HttpError as error:
            outcome = Outcome.REJECTED if error.status in (429, 503) else Outcome.FAILED
            self.dispatcher.finish(call, outcome, error.code)
            return call_result(call, error.status, b"")
        except asyncio.CancelledError:
            self.dispatcher.finish(call, Outcome.CANCELLED, "cancelled")
            raise
        except Exception:
            log.exception("job call %s failed", call.request_id)
            self.dispatcher.finish(call, Outcome.FAILED, "internal_error")
            return call_result(call, 500, b"")
        return call_result(call, status, body)

    async def ended(self, job: LiveJob, every_s: float | None = None) -> bool:
        """Whether ``job`` ended, here or through another replica (``JobSync.ended``; ``every_s``: how stale
        the store's answer may be, None: the sync's default)."""
        return await (self.sync.ended(job) if every_s is None else self.sync.ended(job, every_s))

    def touch(self, job: LiveJob) -> None:
        """The job changed: write it to the store soon (writes coalesce; never blocks the caller)."""
        self.sync.touch(job)

    def finish(self, job: LiveJob, status: str, reason: str, store: bool = True) -> bool:
        """The job's single terminal transition; returns False when it had already ended. The terminal
        record is written, then the job leaves memory (``store=False``: the store already says so)."""
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
        self.sync.retire(job, store)
        return True

    # --- lookups ------------------------------------------------------------------------------------------
    def _live(self, job_id: str, principal: Principal) -> LiveJob | None:
        job = self.jobs.get(job_id)
        return job if job is not None and job.tenant == principal.tenant else None

    async def _here(self, job_id: str, principal: Principal) -> LiveJob:
        """A job this replica runs; a job of another replica is named, a missing or foreign one is 404."""
        job = self._live(job_id, principal)
        if job is not None:
            return job
        record = await self.sync.record(job_id, principal)
        if record.status in TERMINAL:
            raise HttpError(409, "job_finished", f"job {job_id[:64]!r} is {record.status}")
        raise HttpError(409, "job_elsewhere", f"job {job_id[:64]!r} runs on replica {record.owner[:64]!r}", 1.0)

    # --- background ---------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Resume this replica's open jobs, claim stale replicas' ones, start heartbeat and reaper."""
        await self.sync.start()

    async def reap_idle(self) -> None:
        """Cancel workflows with no stage running and no activity for ``timeouts.job_idle_s``."""
        now = self.dispatcher.clock()
        for job in list(self.jobs.values()):
            idle = now - job.last_activity_s > self.config.timeouts.job_idle_s
            if idle and job.status == "running" and job.kind == "workflow" and not job.active_stages:
                self.finish(job, "cancelled", "idle timeout")

    async def shutdown(self) -> None:
        """Stop running here; open jobs stay open in the store (resumed by a restart or another replica)."""
        await self.sync.stop()
