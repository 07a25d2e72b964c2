"""The job store protocol: what the gateway persists of a job, and the operations replicas need.

Times are Unix seconds (wall clock: they must mean the same on every replica and after a restart). A
record is written whenever a job changes state or finishes a stage, so a restarted or surviving replica can
resume it or end it with a reason; ``owner`` and ``heartbeat_unix_s`` let a replica take over the running
jobs of one that died (``claim_stale``), atomically, so exactly one replica ends or resumes each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

TERMINAL = frozenset({"completed", "failed", "cancelled"})


@dataclass(slots=True)
class JobRecord:
    id: str
    tenant: str
    kind: str
    template: str
    status: str
    reason: str
    owner: str  # the replica that runs the job now
    created_unix_s: float
    updated_unix_s: float
    slo_s: float | None = None
    finish_unix_s: float | None = None
    stages: list[dict[str, Any]] = field(default_factory=list)  # results of finished stages / rows
    state: dict[str, Any] = field(default_factory=dict)  # what resuming needs (the submission, progress)


class JobStore(Protocol):
    async def put(self, record: JobRecord) -> bool:
        """Insert or replace the record with this id, unless the stored one is terminal: a terminal record is
        final (a cancel written by one replica must survive the owner's next progress write). True when
        written, False when the stored record was already terminal."""

    async def admit(self, record: JobRecord, limit: int) -> bool:
        """Insert a new record only while its tenant holds fewer than ``limit`` open ones, as one atomic step
        (two replicas cannot both take a tenant's last place). True when inserted."""

    async def get(self, job_id: str) -> JobRecord | None: ...

    async def count_open(self, tenant: str) -> int:
        """Records of this tenant not in a terminal state."""

    async def heartbeat(self, owner: str, now_unix_s: float) -> None:
        """This replica is alive at ``now_unix_s``."""

    async def claim_stale(self, owner: str, stale_before_unix_s: float) -> list[JobRecord]:
        """Atomically take over every non-terminal record whose owner's last heartbeat is older than
        ``stale_before_unix_s`` (or that has no heartbeat); returns them, now owned by ``owner``, oldest
        first. Records ``owner`` already holds are left out (``owned_open`` lists those). Of two replicas
        claiming at once, each record goes to exactly one. Heartbeat before claiming: a claimer with no
        fresh heartbeat is stale itself, and the next claimer may take over what it just took."""

    async def owned_open(self, owner: str) -> list[JobRecord]:
        """Non-terminal records owned by ``owner``, oldest first (what a restarted replica of that name must
        resume)."""

    async def delete_finished_before(self, unix_s: float) -> int:
        """Retention: drop terminal records finished before ``unix_s`` (``finish_unix_s``, else
        ``updated_unix_s``); returns how many."""

    async def close(self) -> None: ...
