"""Issue 25: at the open-file limit, a new connection is answered 503 (with a clear error), not closed."""

from __future__ import annotations

import contextlib
import resource
import socket
import subprocess
import sys
from pathlib import Path

import yaml

from slosched.bench.chaos import setup
from slosched.devtools.stub import free_port

NOFILE = 128
NUM_SOCKETS = 110


def _lowered() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def _ask(sock: socket.socket) -> bytes:
    with contextlib.suppress(OSError):
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        return sock.recv(4096)
    return b""


def test_connections_beyond_the_open_file_limit_get_503(tmp_path: Path) -> None:
    servers = setup.start_backends(tmp_path)
    port = free_port()
    config = setup.gateway_config(port, servers.backend_urls, tmp_path / "jobs.sqlite3", tenants=False)
    (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "slosched.cli", "serve", str(tmp_path / "gateway.yaml")]
    with (tmp_path / "gateway.log").open("ab") as log:
        gateway = subprocess.Popen(command, stdout=log, stderr=log, preexec_fn=_lowered)
    sockets: list[socket.socket] = []
    try:
        assert setup._wait_ready(f"http://127.0.0.1:{port}/health", gateway, 30) is None
        answers = []
        for _ in range(NUM_SOCKETS):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sockets.append(sock)
            answers.append(_ask(sock))
        statuses = [answer.split(b" ", 2)[1] if answer.startswith(b"HTTP/1.1 ") else b"none" for answer in answers]
        assert set(statuses) <= {b"200", b"503"}, statuses
        assert statuses.count(b"503") > 0 and b"too_many_connections" in answers[-1]
    finally:
        for sock in sockets:
            sock.close()
        gateway.terminate()
        gateway.wait(10)
        setup.stop_all(servers)
