"""Real database servers for the job-store tests: one PostgreSQL 15 and one Redis per session, each on a free
port under a temporary directory, without persistence, stopped by PID at the end.

A backend whose server binary (or client library) is missing is skipped, unless SLOSCHED_REQUIRE_SERVERS=1
(CI) makes that a failure. initdb refuses to run as root, so as root PostgreSQL runs as the ``postgres`` user
(Debian creates it with the server package).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def missing(what: str) -> NoReturn:
    """Skip, or fail where the servers are required."""
    if os.environ.get("SLOSCHED_REQUIRE_SERVERS") == "1":
        pytest.fail(f"{what} (SLOSCHED_REQUIRE_SERVERS=1)")
    pytest.skip(what)


def client_library(module: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        missing(f"Python package {package} not installed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(ready: Callable[[], bool], proc: subprocess.Popen[bytes], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}")
        with contextlib.suppress(Exception):
            if ready():
                return
        time.sleep(0.05)
    raise RuntimeError(f"{what} not ready after {timeout_s:.0f} s")


def stop(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    if not (PG_BIN / "initdb").exists() or not (PG_BIN / "postgres").exists():
        missing(f"PostgreSQL 15 server not found in {PG_BIN} (Debian package postgresql-15)")
    psycopg = client_library("psycopg", "psycopg[binary]")
    user: str | None = None
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres").pw_name
        except KeyError:
            missing("running as root and no 'postgres' user to run PostgreSQL as")
    root = Path(tempfile.mkdtemp(prefix="slosched-pg-"))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    data, port = root / "data", free_port()
    initdb = [str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "--no-sync"]
    subprocess.run(initdb, check=True, capture_output=True, user=user)
    server = [str(PG_BIN / "postgres"), "-D", str(data), "-p", str(port), "-k", str(root)]
    server += ["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off"]
    server += ["-c", "synchronous_commit=off"]
    log = (root / "server.log").open("wb")
    proc = subprocess.Popen(server, stdout=log, stderr=subprocess.STDOUT, user=user)
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    try:
        wait_until(lambda: psycopg.connect(url, connect_timeout=1).close() is None, proc, "postgres")
        yield url
    finally:
        stop(proc, signal.SIGINT)  # SIGINT: PostgreSQL's fast shutdown
        log.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        missing("redis-server not found (Debian package redis-server)")
    redis = client_library("redis", "redis")
    root, port = Path(tempfile.mkdtemp(prefix="slosched-redis-")), free_port()
    server = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    server += ["--dir", str(root), "--daemonize", "no"]
    proc = subprocess.Popen(server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:

        def ping() -> bool:
            with redis.Redis.from_url(url, socket_timeout=1) as client:
                return bool(client.ping())

        wait_until(ping, proc, "redis-server")
        yield url
    finally:
        stop(proc, signal.SIGTERM)
        shutil.rmtree(root, ignore_errors=True)
