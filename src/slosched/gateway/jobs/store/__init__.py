"""Durable job state for the gateway: one ``JobStore`` protocol, SQLite by default, PostgreSQL or Redis for
gateways run as several replicas (``open_store`` picks by URL).

The server backends import their client library only when asked for, so a SQLite gateway needs neither
psycopg nor redis installed. ``open_store`` is synchronous (call it while building the gateway): SQLite
opens its file and schema at once; PostgreSQL and Redis connect, and create what is missing, on first use.
"""

from __future__ import annotations

from pathlib import Path

from slosched.core.errors import ConfigError
from slosched.gateway.jobs.store.base import TERMINAL, JobRecord, JobStore
from slosched.gateway.jobs.store.memory import MemoryStore

__all__ = ["SCHEMES", "TERMINAL", "JobRecord", "JobStore", "MemoryStore", "open_store", "sqlite_path"]

SCHEMES = ("memory://", "sqlite:///PATH", "postgresql://...", "redis://...", "rediss://...")


def _shown(url: str) -> str:
    # A store URL may carry a password: show only the scheme part, truncated.
    return url.split("://", 1)[0][:32] + "://..." if "://" in url else url[:64]


def sqlite_path(url: str) -> Path:
    """``sqlite:///rel/path`` is relative to the working directory, ``sqlite:////abs/path`` absolute."""
    rest = url[len("sqlite:///") :]
    if not url.startswith("sqlite:///") or not rest or rest.endswith("/"):
        allowed = "sqlite:///relative/path or sqlite:////abs/path"
        raise ConfigError("job_store", f"a SQLite store URL is {allowed}, got {url[:64]!r}")
    return Path(rest)


def open_store(url: str) -> JobStore:
    """Open (and create where missing: directories, file, tables) the job store at ``url``."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme == "memory":
        return MemoryStore()
    if scheme == "sqlite":
        from slosched.gateway.jobs.store.sqlite import SqliteStore

        return SqliteStore(sqlite_path(url))
    if scheme in ("postgresql", "postgres"):
        from slosched.gateway.jobs.store.postgres import PostgresStore

        return PostgresStore(url)
    if scheme in ("redis", "rediss"):
        from slosched.gateway.jobs.store.redis_store import RedisStore

        return RedisStore(url)
    raise ConfigError("job_store", f"unknown store URL {_shown(url)!r}; allowed: {', '.join(SCHEMES)}")
