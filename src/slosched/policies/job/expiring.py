"""Per-job entries that stop mattering at a known time (a job's deadline, or a grace past it), forgotten in
bulk: the job layer's three open sets (relegated jobs, open stages of the pace test, the admission feedback's
open outcomes) each gain an entry per job and lose most of them by an event that may never come (a job that
finishes leaves its last stage open; a relegated job is never re-admitted). Scanning on every insertion
costs O(n) per job; dropping what has expired when the set has doubled since the last drop costs O(1)
amortised and keeps the set within twice what is live (plus a floor of ``FLOOR`` entries)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

FLOOR = 64  # below this many entries the set is never scanned

V = TypeVar("V")


@dataclass(slots=True)
class ExpiringEntries(Generic[V]):
    """Values by job id, each kept until its expiry time (``put``); ``pop`` and ``in`` as a dict's."""

    _entries: dict[str, tuple[float, V]] = field(default_factory=dict)
    _kept_at_last_drop: int = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._entries

    def put(self, job_id: str, value: V, expires_s: float, now_s: float) -> None:
        """Keep ``value`` for ``job_id`` until ``expires_s``; if the set has doubled since the last drop, drop
        every entry that expired before ``now_s``."""
        self._entries[job_id] = (expires_s, value)
        if len(self._entries) > 2 * self._kept_at_last_drop + FLOOR:
            self._entries = {job: entry for job, entry in self._entries.items() if entry[0] >= now_s}
            self._kept_at_last_drop = len(self._entries)

    def pop(self, job_id: str) -> V | None:
        """``job_id``'s value, removed; None if it has none (never put, popped, or dropped as expired)."""
        entry = self._entries.pop(job_id, None)
        return None if entry is None else entry[1]
