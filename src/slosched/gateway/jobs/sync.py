"""The job manager's side of the durable store: coalesced writes, lookups, heartbeat, resume and claim.

Writes never block the event loop (the stores are async) and never reorder: each job has at most one
write in flight, and the next one snapshots the job as it is then, so the latest state always wins; a
relQuery's row progress is written at most every ``_PROGRESS_EVERY_S``, not once per row. A job open when
its replica stopped is resumed by that replica's restart (``owned_open``) or claimed by another replica
once its heartbeat is ``_STALE_BEATS`` intervals old (``claim_stale``).

A job cancelled through another replica is stopped by its owner when a write is refused, at its next beat,
and before it releases more work (``ended``: each workflow stage, each relQuery batch of rows, the record read
at most every ``_CHECK_EVERY_S``), so the owner starts at most about that long's worth of calls after the cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Protocol

from slosched.gateway.backends.backend import periodic
from slosched.gateway.calls.call import HttpError
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.jobs.live import LiveJob, from_record
from slosched.gateway.jobs.store.base import TERMINAL, JobRecord, JobStore
from slosched.gateway.ops.config import GatewayConfig
from slosched.gateway.ops.identity import Principal


class SyncHost(Protocol):
    """The jobs this replica runs, on the job manager (``manager.JobManager``)."""

    @property
    def jobs(self) -> dict[str, LiveJob]: ...

    @property
    def config(self) -> GatewayConfig: ...

    @property
    def dispatcher(self) -> Dispatcher: ...

    def finish(self, job: LiveJob, status: str, reason: str, store: bool = True) -> bool: ...

    def start_rows(self, job: LiveJob) -> None: ...

    async def reap_idle(self) -> None: ...


log = logging.getLogger("slosched.gateway")
_PROGRESS_EVERY_S = 1.0
_ROWS_PER_PROGRESS_S = 2_000  # 10,000 rows: one progress write every 5 s
_STALE_BEATS = 3
_TERMINAL_TRIES = 3
_CHECK_EVERY_S = 0.05  # a running relQuery's record is re-read at most this often (20 reads/s, ~10 us each)


def _unavailable(error: Exception) -> HttpError:
    log.warning("job store unavailable: %s: %s", type(error).__name__, error)
    return HttpError(503, "store_unavailable", "the job store is unavailable; retry later", 1.0)


class JobSync:
    def __init__(self, manager: SyncHost, store: JobStore, replica: str, wall: Callable[[], float]) -> None:
        self.manager = manager
        self.store = store
        self.replica = replica
        self.wall = wall
        self.retiring: dict[str, asyncio.Task[None]] = {}
        self._stop = asyncio.Event()
        self._loops: list[asyncio.Task[None]] = []

    # --- writes -------------------------------------------------------------------------------------------
    async def admit(self, job: LiveJob, limit: int) -> bool:
        """The creation record, written only while the tenant holds fewer than ``limit`` open jobs in the
        store (atomic across replicas); False: refused."""
        try:
            return await self.store.admit(job.to_record(self.replica, self.wall()), limit)
        except Exception as error:
            raise _unavailable(error) from error

    def touch(self, job: LiveJob) -> None:
        job.dirty = True
        if job.writer is None or job.writer.done():
            job.writer = asyncio.create_task(self._write_loop(job))

    async def _write_loop(self, job: LiveJob) -> None:
        failures = 0
        while job.dirty:
            job.dirty = False
            try:
                written = await self.store.put(job.to_record(self.replica, self.wall()))
                failures = 0
                if not written and job.status == "running":
                    await self._ended_elsewhere(job)  # cancelled through another replica: stop now
                    return
            except Exception as error:  # keep serving; a terminal record is retried a few times
                log.warning("job %s: store write failed: %s: %s", job.id, type(error).__name__, error)
                failures += 1
                job.dirty = True  # unsaved: the next touch (or, for a finished job, the next beat) retries
                if job.status == "running" or failures >= _TERMINAL_TRIES:
                    return
                await asyncio.sleep(0.5)
                continue
            if job.dirty and job.status == "running" and job.kind == "relquery":
                # A write carries every row's answer: larger jobs write less often, so the writes'
                # share of the event loop stays small (a crash loses at most this much progress).
                rows = len(job.plan.rows) if job.plan is not None else 0
                await asyncio.sleep(max(_PROGRESS_EVERY_S, rows / _ROWS_PER_PROGRESS_S))

    def retire(self, job: LiveJob, store: bool) -> None:
        """After the terminal transition: write the record, then drop the job from memory."""
        self.retiring[job.id] = asyncio.create_task(self._retire(job, store))

    async def _retire(self, job: LiveJob, store: bool) -> None:
        try:
            if store:
                self.touch(job)
            if job.writer is not None:
                await job.writer
        finally:
            # A finished job leaves memory only once the store holds its terminal record: while the store is
            # down it stays readable here, and each heartbeat retries the write (``_retry_unsaved``).
            if self.manager.jobs.get(job.id) is job and not (store and job.dirty):
                del self.manager.jobs[job.id]
            self.retiring.pop(job.id, None)

    async def settle(self, job: LiveJob) -> None:
        """Wait until a finished job's terminal record is written (before answering the client)."""
        task = self.retiring.get(job.id)
        if task is not None:
            await asyncio.shield(task)

    # --- reads --------------------------------------------------------------------------------------------
    async def count_open(self, tenant: str) -> int:
        try:
            return await self.store.count_open(tenant)
        except Exception as error:
            raise _unavailable(error) from error

    async def record(self, job_id: str, principal: Principal) -> JobRecord:
        """The stored record of a job of this tenant; 404 when missing or another tenant's."""
        try:
            record = await self.store.get(job_id) if len(job_id) <= 128 else None
        except Exception as error:
            raise _unavailable(error) from error
        if record is None or record.tenant != principal.tenant:
            raise HttpError(404, "not_found", f"job {job_id[:64]!r} not found")
        return record

    async def cancel_elsewhere(self, job_id: str, principal: Principal) -> JobRecord:
        """Cancel a job another replica runs: the record says so, and the owner stops it at its next beat."""
        record = await self.record(job_id, principal)
        if record.status not in TERMINAL:
            now = self.wall()
            record.status, record.reason = "cancelled", "cancelled by client"
            record.updated_unix_s = record.finish_unix_s = now
            try:
                written = await self.store.put(record)
            except Exception as error:
                raise _unavailable(error) from error
            if not written:  # it ended meanwhile: the stored end stands
                return await self.record(job_id, principal)
        return record

    # --- lifecycle ----------------------------------------------------------------------------------------
    async def start(self) -> None:
        config = self.manager.config
        self._stop.clear()
        try:
            await self.store.heartbeat(self.replica, self.wall())
            for record in await self.store.owned_open(self.replica):
                self.resume(record)
        except Exception as error:  # the gateway still serves calls; jobs resume at the next beat
            log.warning("job store unavailable at start: %s: %s", type(error).__name__, error)
        reap_s = min(config.timeouts.job_idle_s / 4, 5.0)
        self._loops = [
            asyncio.create_task(periodic(config.job_heartbeat_s, self.beat, self._stop)),
            asyncio.create_task(periodic(reap_s, self.manager.reap_idle, self._stop)),
        ]

    def _retry_unsaved(self) -> None:
        """Finished jobs whose terminal record could not be written (the store was down) try again."""
        for job in list(self.manager.jobs.values()):
            if job.status != "running" and job.dirty and job.id not in self.retiring:
                self.retire(job, store=True)

    async def beat(self) -> None:
        """Heartbeat; claim stale replicas' jobs; stop jobs cancelled through another replica; retention."""
        self._retry_unsaved()  # first: it needs no store round trip, and a down store fails the rest
        config, store, now = self.manager.config, self.store, self.wall()
        await store.heartbeat(self.replica, now)
        for record in await store.claim_stale(self.replica, now - _STALE_BEATS * config.job_heartbeat_s):
            log.info("job %s: claimed from a stale replica", record.id)
            self.resume(record)
        owned = {record.id for record in await store.owned_open(self.replica)}
        for job in list(self.manager.jobs.values()):
            if job.status == "running" and job.id not in owned and (job.writer is None or job.writer.done()):
                await self._ended_elsewhere(job)
        await store.delete_finished_before(now - config.job_retention_s)

    async def ended(self, job: LiveJob, every_s: float = _CHECK_EVERY_S) -> bool:
        """Before more of ``job``'s work starts: True when it is no longer running, as the store's record says
        another replica ended it (a cancel) and it is then finished here too (without the runner's task being
        cancelled: the caller stops). Reads the record at most every ``every_s``; a store that does not
        answer reads as "still running" (writes and beats catch up)."""
        now = time.monotonic()
        if job.status != "running" or now - job.checked_s < every_s:
            return job.status != "running"
        job.checked_s = now
        try:
            record = await self.store.get(job.id)
        except Exception as error:
            log.warning("job %s: store read failed: %s: %s", job.id, type(error).__name__, error)
            return False
        if record is not None and record.status in TERMINAL and job.status == "running":
            self.manager.finish(job, record.status, record.reason, store=False)
        return job.status != "running"

    async def _ended_elsewhere(self, job: LiveJob) -> None:
        record = await self.store.get(job.id)
        if record is None or record.status not in TERMINAL:
            return  # not written yet, or taken over (a replica of our name must not run it twice: ours wins)
        if self.manager.finish(job, record.status, record.reason, store=False) and job.task is not None:
            job.task.cancel()

    def resume(self, record: JobRecord) -> None:
        manager = self.manager
        if record.id in manager.jobs:
            return
        job = from_record(record, manager.dispatcher.clock(), self.wall())
        manager.jobs[job.id] = job
        if job.kind == "relquery" and (job.plan is None or not job.stages):
            manager.finish(job, "failed", "cannot resume: submission missing")
            return
        self.touch(job)  # now owned by this replica
        if job.kind == "relquery":
            manager.start_rows(job)

    async def stop(self) -> None:
        """Stop loops and runners; write every open job's latest state; close the store."""
        self._stop.set()
        for task in self._loops:
            task.cancel()
        for task in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        jobs = list(self.manager.jobs.values())
        runners = [job.task for job in jobs if job.task is not None and not job.task.done()]
        for task in runners:
            task.cancel()
        await asyncio.gather(*runners, return_exceptions=True)
        for job in jobs:
            if job.status == "running":
                self.touch(job)
        writers = [job.writer for job in jobs if job.writer is not None]
        await asyncio.gather(*writers, *self.retiring.values(), return_exceptions=True)
        await self.store.close()
