"""Paced fan-out of a relQuery's rows: rows enter the instance queues as room frees, never all at once.

Sending 10,000 rows at once failed most of them with ``queue_full`` and stalled the event loop for most of
a second. Here a runner sends a batch no larger than the queues' free room (less what other runners are
about to take, and its fair share when several relQueries run), renders each row's prompt only then, and
refills as its calls finish; before each batch it asks whether the job ended elsewhere (a cancel through
another replica, ``JobSync.ended``) and stops releasing rows then. A row refused with ``queue_full`` anyway
(other traffic took the room first) goes back to the pending rows and is retried, a bounded number of times.

With fair sharing on, a runner also keeps its tenant within the tenant's weighted share of the queues' capacity
(``policies/fairness/places.fair_room``: the whole capacity while no other tenant holds calls), so a large
relQuery trickles in at its share instead of taking every free place; a row displaced by another tenant's
call (429 ``displaced``) goes back to the pending rows without counting as a refusal.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Protocol

from slosched.core.request import Outcome
from slosched.core.views import JobView
from slosched.gateway.calls.call import COMPLETIONS, Call, HttpError, SloHeaders, parse_call
from slosched.gateway.dispatch.admission import admit_stage
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.jobs.live import ROWS_STAGE, LiveJob
from slosched.gateway.ops.config import GatewayConfig

_YIELD_EVERY = 256  # rows rendered between two yields to the event loop
_MAX_REFUSALS = 5  # queue_full retries of one row before its refusal stands
_IDLE_WAIT_S = 0.05  # no room anywhere and nothing in flight: look again after this


class RowHost(Protocol):
    """What a runner shares with the other runners, on the job manager (``manager.JobManager``)."""

    active_relqueries: int  # relQueries running here: each takes its fair share of the room
    starting: int  # row calls created and not routed yet (their room is spoken for)

    @property
    def dispatcher(self) -> Dispatcher: ...

    @property
    def config(self) -> GatewayConfig: ...

    async def run_call(self, call: Call) -> dict[str, Any]: ...

    def touch(self, job: LiveJob) -> None: ...

    async def ended(self, job: LiveJob) -> bool: ...


class RowRunner:
    """Runs one relQuery's unanswered rows to the end; shared counters live on the manager."""

    def __init__(self, manager: RowHost, job: LiveJob) -> None:
        assert job.plan is not None
        self.manager = manager
        self.job = job
        self.plan = job.plan
        self.results: list[Any] = job.stages[0]["results"]
        # Rows go out in the plan's order (sorted for prefix reuse when the job asked); results keep theirs.
        self.pending = deque(index for index in self.plan.sequence() if self.results[index] is None)
        self.refusals: dict[int, int] = {}
        self.inflight: set[asyncio.Task[None]] = set()
        self.answers: asyncio.Queue[tuple[int, dict[str, Any]]] = asyncio.Queue()
        self.unstarted = 0  # tasks created whose call has not been routed yet (their room is spoken for)
        self.outstanding = 0  # rows sent whose answer was not recorded yet

    async def run(self) -> None:
        manager = self.manager
        manager.active_relqueries += 1
        try:
            while self.pending or self.outstanding:
                if self.pending and await manager.ended(self.job):
                    return  # ended elsewhere (a cancel through another replica): no more rows start
                self._launch(self._batch_size())
                await asyncio.sleep(0)  # a batch rendered: let the loop serve others before the next
                if self.outstanding:
                    self._record(*await self.answers.get())
                    while not self.answers.empty():
                        self._record(*self.answers.get_nowait())
                elif self.pending:
                    await asyncio.sleep(_IDLE_WAIT_S)
        finally:
            manager.active_relqueries -= 1
            manager.starting -= self.unstarted  # tasks cancelled before their first step
            self.unstarted = 0
            for task in self.inflight:
                task.cancel()
            if self.inflight:
                await asyncio.gather(*self.inflight, return_exceptions=True)

    async def _row(self, index: int, call: Call) -> None:
        self.manager.starting -= 1  # enqueued in this step (dispatcher.complete routes before it awaits)
        self.unstarted -= 1
        try:
            result = await self.manager.run_call(call)
        finally:
            self.inflight.discard(asyncio.current_task())
        self.answers.put_nowait((index, result))

    def _batch_size(self) -> int:
        dispatcher = self.manager.dispatcher
        share = max(dispatcher.capacity() // max(self.manager.active_relqueries, 1), 1)
        room = dispatcher.free_room() - self.manager.starting
        fair = dispatcher.tenant_room(self.job.tenant)
        if fair is not None:
            room = min(room, fair - self.unstarted)
        return max(min(room, share - self.outstanding, len(self.pending), _YIELD_EVERY), 0)

    def _launch(self, count: int) -> None:
        if count <= 0:
            return
        manager, job = self.manager, self.job
        dispatcher = manager.dispatcher
        now = dispatcher.clock()
        slo = SloHeaders(tenant=job.tenant, priority=job.priority, job_id=job.id, stage=ROWS_STAGE)
        batch = []
        for _ in range(count):
            index = self.pending.popleft()
            try:
                body = self.plan.body(index)
                call = parse_call(COMPLETIONS, body, slo, now, manager.config.default_max_tokens, dispatcher.models)
            except HttpError as error:  # validated at submission; a row still refused fails alone
                self.results[index] = {
                    "outcome": Outcome.REJECTED.value,
                    "reason": error.code,
                    "status": error.status,
                    "text": None,
                    "error": error.message[:200],
                }
                continue
            call.request.template = "relquery"
            call.request.job_arrival_s = job.arrival_s
            call.request.deadline_s = job.deadline_s
            dispatcher.accept(call)
            batch.append((index, call))
        view = JobView.at_release(
            job.id, job.kind, job.template, job.arrival_s, job.slo_s, ROWS_STAGE, job.finished_stages
        )
        requests = [call.request for _, call in batch]
        admit_stage(dispatcher, view, requests, now, reject=False)  # rows already accepted: relegated, never refused
        manager.starting += len(batch)
        self.outstanding += len(batch)
        self.unstarted += len(batch)
        for index, call in batch:
            self.inflight.add(asyncio.create_task(self._row(index, call)))

    def _record(self, index: int, result: dict[str, Any]) -> None:
        self.outstanding -= 1
        rejected = result["outcome"] == Outcome.REJECTED.value
        if rejected and result["reason"] == "displaced":
            self.pending.append(index)  # its place went to a tenant under its share: not a refusal
            return
        refused = rejected and result["reason"] == "queue_full"
        if refused and self.refusals.get(index, 0) < _MAX_REFUSALS:
            self.refusals[index] = self.refusals.get(index, 0) + 1
            self.pending.append(index)
            return
        self.results[index] = result
        self.job.last_activity_s = self.manager.dispatcher.clock()
        self.manager.touch(self.job)
