"""``open_store``: the URL forms, the errors for bad ones, and SQLite shared by processes on one host."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from slosched.gateway.jobs.store import JobRecord, open_store, sqlite_path
from slosched.gateway.jobs.store.memory import MemoryStore
from slosched.gateway.jobs.store.sqlite import SqliteStore


@pytest.mark.parametrize("url", ["mysql://u:secret-pw@h/db", "jobs.sqlite3", "", "file:///tmp/x"])
def test_unknown_scheme_names_the_field_and_the_allowed_ones(url: str) -> None:
    with pytest.raises(ConfigError) as err:
        open_store(url)
    message = str(err.value)
    assert err.value.field == "job_store"
    assert "sqlite:///" in message and "postgresql://" in message and "redis://" in message
    assert "memory://" in message and "secret-pw" not in message  # a URL's password is never echoed


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite://relative.db", "sqlite:///dir/"])
def test_bad_sqlite_urls(url: str) -> None:
    with pytest.raises(ConfigError, match="job_store: a SQLite store URL is sqlite:///relative/path"):
        open_store(url)


def test_sqlite_paths_relative_and_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert sqlite_path("sqlite:///.slosched/jobs.sqlite3") == Path(".slosched/jobs.sqlite3")
    assert sqlite_path("sqlite:////var/lib/jobs.db") == Path("/var/lib/jobs.db")
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///a/b/jobs.sqlite3")  # parent directories are created
    assert isinstance(store, SqliteStore)
    asyncio.run(store.close())
    with sqlite3.connect(tmp_path / "a" / "b" / "jobs.sqlite3") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"jobs_status_owner", "jobs_tenant_status"} <= indexes


def test_memory_url() -> None:
    assert isinstance(open_store("memory://"), MemoryStore)


_CLAIMER = """
import asyncio, json, sys
from slosched.gateway.jobs.store import open_store

async def main():
    store = open_store(sys.argv[1])
    await store.heartbeat(sys.argv[2], 10.0)
    claimed = await store.claim_stale(sys.argv[2], 1.0)
    await store.close()
    print(json.dumps([r.id for r in claimed]))

asyncio.run(main())
"""


def test_sqlite_replicas_in_separate_processes_never_share_a_job(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.sqlite3'}"

    async def seed() -> None:
        store = open_store(url)
        for i in range(300):
            await store.put(JobRecord(f"j{i:03d}", "t", "k", "x", "running", "", f"dead{i % 7}", 1.0, 1.0))
        await store.close()

    asyncio.run(seed())
    procs = [
        subprocess.Popen([sys.executable, "-c", _CLAIMER, url, name], stdout=subprocess.PIPE, text=True)
        for name in ("ra", "rb", "rc")
    ]
    claimed = [set(json.loads(proc.communicate(timeout=60)[0])) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    assert sum(len(ids) for ids in claimed) == 300 and set().union(*claimed) == {f"j{i:03d}" for i in range(300)}


def test_postgres_reopens_a_dropped_connection(postgres_url: str) -> None:
    import psycopg

    async def scenario() -> None:
        store = open_store(postgres_url)
        await store.put(JobRecord("j1", "t", "k", "x", "running", "", "r1", 1.0, 1.0))
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
                " AND datname = current_database() AND backend_type = 'client backend'"
            )
        with pytest.raises(psycopg.OperationalError):
            await store.get("j1")  # the call in flight when the server went away fails...
        got = await store.get("j1")  # ...and the next one reconnects
        assert got is not None and got.owner == "r1"
        await store.close()

    asyncio.run(scenario())
