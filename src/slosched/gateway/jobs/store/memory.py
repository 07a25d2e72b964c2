"""An in-process job store: a dict, for tests and ``memory://`` (one replica, nothing survives a restart).

Records are copied in and out, so a caller mutating a record it holds never changes the store behind its
back (the durable stores behave the same way by construction). No method awaits between reading and
writing, so on one event loop every operation is atomic, ``claim_stale`` included.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from slosched.gateway.jobs.store.base import TERMINAL, JobRecord


@dataclass(slots=True)
class MemoryData:
    """What several ``MemoryStore`` objects may share, standing in for one database in tests."""

    records: dict[str, JobRecord] = field(default_factory=dict)
    heartbeats: dict[str, float] = field(default_factory=dict)


def finished_at(record: JobRecord) -> float:
    """When a terminal record ended: its finish time, else its last update (a record ended without one)."""
    return record.finish_unix_s if record.finish_unix_s is not None else record.updated_unix_s


class MemoryStore:
    def __init__(self, data: MemoryData | None = None) -> None:
        self.data = data if data is not None else MemoryData()

    async def put(self, record: JobRecord) -> bool:
        stored = self.data.records.get(record.id)
        if stored is not None and stored.status in TERMINAL:
            return False
        self.data.records[record.id] = copy.deepcopy(record)
        return True

    async def admit(self, record: JobRecord, limit: int) -> bool:
        if await self.count_open(record.tenant) >= limit:  # no await inside: atomic on one loop
            return False
        return await self.put(record)

    async def get(self, job_id: str) -> JobRecord | None:
        record = self.data.records.get(job_id)
        return copy.deepcopy(record) if record is not None else None

    async def count_open(self, tenant: str) -> int:
        return sum(1 for r in self.data.records.values() if r.tenant == tenant and r.status not in TERMINAL)

    async def heartbeat(self, owner: str, now_unix_s: float) -> None:
        self.data.heartbeats[owner] = now_unix_s

    async def claim_stale(self, owner: str, stale_before_unix_s: float) -> list[JobRecord]:
        beats = self.data.heartbeats
        claimed: list[JobRecord] = []
        for record in self.data.records.values():
            if record.status in TERMINAL or record.owner == owner:
                continue
            beat = beats.get(record.owner)
            if beat is None or beat < stale_before_unix_s:
                record.owner = owner
                claimed.append(copy.deepcopy(record))
        return sorted(claimed, key=lambda r: (r.created_unix_s, r.id))

    async def owned_open(self, owner: str) -> list[JobRecord]:
        owned = [r for r in self.data.records.values() if r.owner == owner and r.status not in TERMINAL]
        return [copy.deepcopy(r) for r in sorted(owned, key=lambda r: (r.created_unix_s, r.id))]

    async def delete_finished_before(self, unix_s: float) -> int:
        doomed = [r.id for r in self.data.records.values() if r.status in TERMINAL and finished_at(r) < unix_s]
        for job_id in doomed:
            del self.data.records[job_id]
        return len(doomed)

    async def close(self) -> None:
        """Nothing to release."""
