"""The job store for gateway replicas on several hosts: PostgreSQL through psycopg 3 (async).

One connection per store, used by one coroutine at a time (an asyncio lock): job-state writes are a few per
job, far below what one connection carries, and a pool would be another dependency. The connection opens,
and the tables are created where missing, on first use; a broken connection is reopened on the next call.

``claim_stale`` is one ``UPDATE ... RETURNING`` inside a transaction that first takes a transaction-level
advisory lock. The lock matters: under READ COMMITTED a second claimer blocked on a row re-checks only that
row, not its snapshot of the heartbeats, so without it two claimers could both take a job whose new owner
has not heartbeated yet. Claims are rare (one per replica per heartbeat period), so serialising them is free.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg

from slosched.gateway.jobs.store.base import JobRecord
from slosched.gateway.jobs.store.rows import COLUMN_LIST, COLUMNS, TERMINAL_LIST, oldest_first, record_row, row_record

# Any fixed 64-bit key: every slosched replica on the database must agree on it.
CLAIM_LOCK_KEY = 0x51050C4ED
_JSON_COLUMNS = ("stages", "state")
# ``json`` (not jsonb) keeps the text as written, so key order round-trips exactly as on the other stores.
_SELECT = ", ".join(f"{c}::text" if c in _JSON_COLUMNS else c for c in COLUMNS)
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS slosched_jobs (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, kind TEXT NOT NULL, template TEXT NOT NULL,
        status TEXT NOT NULL, reason TEXT NOT NULL, owner TEXT NOT NULL,
        created_unix_s DOUBLE PRECISION NOT NULL, updated_unix_s DOUBLE PRECISION NOT NULL,
        slo_s DOUBLE PRECISION, finish_unix_s DOUBLE PRECISION, stages JSON NOT NULL, state JSON NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS slosched_jobs_status_owner ON slosched_jobs (status, owner)",
    "CREATE INDEX IF NOT EXISTS slosched_jobs_tenant_status ON slosched_jobs (tenant, status)",
    """CREATE TABLE IF NOT EXISTS slosched_heartbeats (
        owner TEXT PRIMARY KEY, beat_unix_s DOUBLE PRECISION NOT NULL)""",
)
_VALUES = ", ".join("%s::json" if c in _JSON_COLUMNS else "%s" for c in COLUMNS)
_UPDATES = ", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS if c != "id")
_OPEN = "status <> ALL(%s)"
_PUT = (
    f"INSERT INTO slosched_jobs ({COLUMN_LIST}) VALUES ({_VALUES}) ON CONFLICT (id) DO UPDATE SET {_UPDATES}"
    f" WHERE slosched_jobs.{_OPEN}"  # a terminal record is final
)
_CLAIM = (
    f"UPDATE slosched_jobs SET owner = %s WHERE {_OPEN} AND owner <> %s"
    " AND owner NOT IN (SELECT owner FROM slosched_heartbeats WHERE beat_unix_s >= %s)"
    f" RETURNING {_SELECT}"
)
_HEARTBEAT = (
    "INSERT INTO slosched_heartbeats (owner, beat_unix_s) VALUES (%s, %s)"
    " ON CONFLICT (owner) DO UPDATE SET beat_unix_s = EXCLUDED.beat_unix_s"
)


class PostgresStore:
    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        async with conn.transaction():
            # Replicas starting together would race on CREATE ... IF NOT EXISTS (a unique violation in
            # the catalog); the advisory lock makes them take turns.
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (CLAIM_LOCK_KEY,))
            for statement in _SCHEMA:
                await conn.execute(statement)
        self._conn = conn
        return conn

    async def _fetch(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        async with self._lock:
            conn = await self._connection()
            cursor = await conn.execute(sql, params)
            return await cursor.fetchall() if cursor.description is not None else []

    async def _execute(self, sql: str, params: tuple[Any, ...]) -> int:
        async with self._lock:
            conn = await self._connection()
            cursor = await conn.execute(sql, params)
            return cursor.rowcount

    async def put(self, record: JobRecord) -> bool:
        return bool(await self._execute(_PUT, (*record_row(record), list(TERMINAL_LIST))))

    async def admit(self, record: JobRecord, limit: int) -> bool:
        count_sql = f"SELECT COUNT(*) FROM slosched_jobs WHERE tenant = %s AND {_OPEN}"
        async with self._lock:
            conn = await self._connection()
            async with conn.transaction():
                # One tenant's admissions take turns across replicas (the lock ends with the transaction).
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"slosched-admit:{record.tenant}",))
                cursor = await conn.execute(count_sql, (record.tenant, list(TERMINAL_LIST)))
                row = await cursor.fetchone()
                if row is not None and int(row[0]) >= limit:
                    return False
                cursor = await conn.execute(_PUT, (*record_row(record), list(TERMINAL_LIST)))
                return bool(cursor.rowcount)

    async def get(self, job_id: str) -> JobRecord | None:
        rows = await self._fetch(f"SELECT {_SELECT} FROM slosched_jobs WHERE id = %s", (job_id,))
        return row_record(rows[0]) if rows else None

    async def count_open(self, tenant: str) -> int:
        sql = f"SELECT COUNT(*) FROM slosched_jobs WHERE tenant = %s AND {_OPEN}"
        rows = await self._fetch(sql, (tenant, list(TERMINAL_LIST)))
        return int(rows[0][0])

    async def heartbeat(self, owner: str, now_unix_s: float) -> None:
        await self._execute(_HEARTBEAT, (owner, now_unix_s))

    async def claim_stale(self, owner: str, stale_before_unix_s: float) -> list[JobRecord]:
        async with self._lock:
            conn = await self._connection()
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (CLAIM_LOCK_KEY,))
                params = (owner, list(TERMINAL_LIST), owner, stale_before_unix_s)
                cursor = await conn.execute(_CLAIM, params)
                rows = await cursor.fetchall()
        return oldest_first([row_record(row) for row in rows])

    async def owned_open(self, owner: str) -> list[JobRecord]:
        sql = f"SELECT {_SELECT} FROM slosched_jobs WHERE owner = %s AND {_OPEN} ORDER BY created_unix_s, id"
        return [row_record(row) for row in await self._fetch(sql, (owner, list(TERMINAL_LIST)))]

    async def delete_finished_before(self, unix_s: float) -> int:
        sql = "DELETE FROM slosched_jobs WHERE status = ANY(%s) AND COALESCE(finish_unix_s, updated_unix_s) < %s"
        return await self._execute(sql, (list(TERMINAL_LIST), unix_s))

    async def close(self) -> None:
        async with self._lock:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None
