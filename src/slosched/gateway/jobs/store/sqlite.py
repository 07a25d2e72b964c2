"""The default job store: one SQLite file in WAL mode (readers never block the writer).

sqlite3 blocks, so every operation runs in a worker thread (``asyncio.to_thread``) on the store's one
connection, which a lock keeps to one thread at a time. Several processes may open the same file (gateway
replicas on one host): writes wait up to ``busy_timeout_s`` for another process's write lock, and
``claim_stale`` takes the write lock before it reads (``BEGIN IMMEDIATE``), so two claimers are serialised
and each job goes to one of them.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from slosched.gateway.jobs.store.base import JobRecord
from slosched.gateway.jobs.store.rows import COLUMN_LIST, COLUMNS, TERMINAL_LIST, oldest_first, record_row, row_record

T = TypeVar("T")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS jobs (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, kind TEXT NOT NULL, template TEXT NOT NULL,
        status TEXT NOT NULL, reason TEXT NOT NULL, owner TEXT NOT NULL,
        created_unix_s REAL NOT NULL, updated_unix_s REAL NOT NULL, slo_s REAL, finish_unix_s REAL,
        stages TEXT NOT NULL, state TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS jobs_status_owner ON jobs (status, owner)",
    "CREATE INDEX IF NOT EXISTS jobs_tenant_status ON jobs (tenant, status)",
    "CREATE TABLE IF NOT EXISTS heartbeats (owner TEXT PRIMARY KEY, beat_unix_s REAL NOT NULL)",
)
_OPEN = f"status NOT IN ({', '.join('?' * len(TERMINAL_LIST))})"
_PUT = (
    f"INSERT INTO jobs ({COLUMN_LIST}) VALUES ({', '.join('?' * len(COLUMNS))}) ON CONFLICT (id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in COLUMNS if c != "id")
    + f" WHERE jobs.{_OPEN}"  # a terminal record is final
)
_CLAIM = (
    f"UPDATE jobs SET owner = ? WHERE {_OPEN} AND owner <> ?"
    " AND owner NOT IN (SELECT owner FROM heartbeats WHERE beat_unix_s >= ?)"
    f" RETURNING {COLUMN_LIST}"
)
_HEARTBEAT = (
    "INSERT INTO heartbeats (owner, beat_unix_s) VALUES (?, ?)"
    " ON CONFLICT (owner) DO UPDATE SET beat_unix_s = excluded.beat_unix_s"
)
_DELETE_FINISHED = (
    f"DELETE FROM jobs WHERE status IN ({', '.join('?' * len(TERMINAL_LIST))})"
    " AND COALESCE(finish_unix_s, updated_unix_s) < ?"
)


class SqliteStore:
    def __init__(self, path: Path, busy_timeout_s: float = 10.0) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # Autocommit (isolation_level=None): each statement is its own transaction unless we BEGIN one.
        self._conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        self._lock = threading.Lock()
        self._conn.execute("PRAGMA journal_mode=WAL")
        # In WAL mode NORMAL syncs at checkpoints, not at every commit (~10x cheaper puts): a crashed
        # process loses nothing, a power cut at most the last commits, and with it the gateway's own calls.
        self._conn.execute("PRAGMA synchronous=NORMAL")
        for statement in _SCHEMA:
            self._conn.execute(statement)

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def locked() -> T:
            with self._lock:
                return fn(self._conn)

        return await asyncio.to_thread(locked)

    async def put(self, record: JobRecord) -> bool:
        params = (*record_row(record), *TERMINAL_LIST)
        return bool(await self._run(lambda c: c.execute(_PUT, params).rowcount))

    async def admit(self, record: JobRecord, limit: int) -> bool:
        params = (*record_row(record), *TERMINAL_LIST)
        count_sql = f"SELECT COUNT(*) FROM jobs WHERE tenant = ? AND {_OPEN}"

        def admit(conn: sqlite3.Connection) -> bool:
            conn.execute("BEGIN IMMEDIATE")  # the write lock first: no other replica counts in between
            try:
                if conn.execute(count_sql, (record.tenant, *TERMINAL_LIST)).fetchone()[0] >= limit:
                    conn.execute("ROLLBACK")
                    return False
                written = bool(conn.execute(_PUT, params).rowcount)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return written

        return await self._run(admit)

    async def get(self, job_id: str) -> JobRecord | None:
        sql = f"SELECT {COLUMN_LIST} FROM jobs WHERE id = ?"
        row = await self._run(lambda c: c.execute(sql, (job_id,)).fetchone())
        return row_record(row) if row is not None else None

    async def count_open(self, tenant: str) -> int:
        sql = f"SELECT COUNT(*) FROM jobs WHERE tenant = ? AND {_OPEN}"
        row = await self._run(lambda c: c.execute(sql, (tenant, *TERMINAL_LIST)).fetchone())
        return int(row[0])

    async def heartbeat(self, owner: str, now_unix_s: float) -> None:
        await self._run(lambda c: c.execute(_HEARTBEAT, (owner, now_unix_s)))

    async def claim_stale(self, owner: str, stale_before_unix_s: float) -> list[JobRecord]:
        params = (owner, *TERMINAL_LIST, owner, stale_before_unix_s)

        def claim(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
            conn.execute("BEGIN IMMEDIATE")
            try:
                rows = conn.execute(_CLAIM, params).fetchall()
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return rows

        rows = await self._run(claim)
        return oldest_first([row_record(row) for row in rows])

    async def owned_open(self, owner: str) -> list[JobRecord]:
        sql = f"SELECT {COLUMN_LIST} FROM jobs WHERE owner = ? AND {_OPEN} ORDER BY created_unix_s, id"
        rows = await self._run(lambda c: c.execute(sql, (owner, *TERMINAL_LIST)).fetchall())
        return [row_record(row) for row in rows]

    async def delete_finished_before(self, unix_s: float) -> int:
        cursor = await self._run(lambda c: c.execute(_DELETE_FINISHED, (*TERMINAL_LIST, unix_s)))
        return int(cursor.rowcount)

    async def close(self) -> None:
        await self._run(lambda c: c.close())
