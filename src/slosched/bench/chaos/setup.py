"""The system ``slosched bench chaos`` attacks: two fake vLLM servers as subprocesses, ``stub`` and
``faulty`` (both ``devtools.faulty``: the stub's answers plus vLLM's refusal of ``max_tokens`` beyond the
context, which fuzzed calls need; ``stub`` never leaves mode ``none``, ``faulty`` is switched per probe),
and the gateway as a real server process (``slosched serve CONFIG``) in front of both.

The gateway config names three tenants with API keys (``tenants:``), a SQLite job store in the run's work
folder and short timeouts, so every wait the suite provokes ends within seconds. Where the gateway in this
tree rejects that config (a feature not there yet), the suite falls back to the legacy form (a flat
``api_keys`` list, no store) and says so: the probes then run against what exists and count what fails.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from slosched.bench.gateway import _rss_mb
from slosched.devtools.stub import free_port

TENANT_A, TENANT_B, TENANT_LIMITED, TENANT_PROXY = "acme", "globex", "limited", "proxy"
KEYS = {
    TENANT_A: "sk-chaos-acme-1",
    TENANT_B: "sk-chaos-globex-1",
    TENANT_LIMITED: "sk-chaos-limited-1",
    TENANT_PROXY: "sk-chaos-proxy-1",
}
# The gateway runs with this open-file limit: room for (1600 - 64) / 2 = 768 client connections, fewer than
# its max_connections; the fd family opens FD_CONNECTIONS at once (each must be answered, 200 or 503).
GATEWAY_NOFILE, FD_CONNECTIONS = 1600, 1000
LIMITED_RPS = 5.0
MIN_SLO_S = 2.0  # tenant B's tightest deadline: a 1 ms claim must be clamped up to it
MAX_JOBS = 64  # gateway-wide open jobs; tenant B may hold only B_MAX_JOBS of them
B_MAX_JOBS = 8
BACKEND_WINDOW, BACKEND_QUEUE = 8, 32  # per backend: small, so a burst overflows them
TIMEOUTS = {
    "connect_s": 1.0,
    "queue_s": 4.0,
    "first_byte_s": 2.0,
    "read_s": 2.0,
    "request_s": 10.0,
    "health_s": 1.0,
    "job_idle_s": 5.0,
}
START_S = 60.0


def auth(tenant: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[tenant]}"}


def tenants_block() -> dict[str, Any]:
    common: dict[str, Any] = {"min_slo_s": None, "token_rate_limit_tps": None, "max_concurrency": None, "act_as": []}
    return {
        TENANT_A: {**common, "api_keys": [KEYS[TENANT_A]], "priority": 0, "rate_limit_rps": None, "max_jobs": 32},
        TENANT_B: {
            **common,
            "api_keys": [KEYS[TENANT_B]],
            "priority": 1,
            "rate_limit_rps": None,
            "max_jobs": B_MAX_JOBS,
            "min_slo_s": MIN_SLO_S,
        },
        TENANT_LIMITED: {
            **common,
            "api_keys": [KEYS[TENANT_LIMITED]],
            "priority": 1,
            "rate_limit_rps": LIMITED_RPS,
            "max_jobs": 4,
        },
        TENANT_PROXY: {
            **common,
            "api_keys": [KEYS[TENANT_PROXY]],
            "priority": 2,
            "rate_limit_rps": LIMITED_RPS,
            "max_jobs": 4,
            "min_slo_s": MIN_SLO_S,
            "act_as": ["*"],
        },
    }


def gateway_config(port: int, backend_urls: dict[str, str], store: Path, tenants: bool) -> dict[str, Any]:
    """The gateway's config; ``tenants`` False gives the legacy form (flat keys, no store)."""
    backends = [
        {"name": name, "url": url, "max_concurrency": BACKEND_WINDOW, "max_queue": BACKEND_QUEUE}
        for name, url in backend_urls.items()
    ]
    config: dict[str, Any] = {
        "port": port,
        "backends": backends,
        "policies": {"router": "least-tokens", "engine": "chunked-fcfs"},
        "timeouts": TIMEOUTS,
        "health_interval_s": 0.5,
        "retry_down_after_s": 2.0,
        "max_jobs": MAX_JOBS,
    }
    if tenants:
        # Body limits short enough that the probes' 20 s bound sees them act (the default allows 30 s of body
        # silence, which a production operator may keep); headers keep their 10 s default: under a burst of
        # 512 connections on 2 cores a shorter one would also time out the server's own backlog.
        server = {"body_chunk_timeout_s": 5.0, "body_timeout_s": 15.0, "shutdown_grace_s": 5.0}
        config |= {"tenants": tenants_block(), "job_store": f"sqlite:///{store}", "server": server}
    else:
        config |= {"api_keys": list(KEYS.values()), "tenant_rate_limits": {TENANT_LIMITED: LIMITED_RPS}}
    return config


def config_problem(config: dict[str, Any]) -> str | None:
    """Why this tree's gateway would refuse ``config`` (its own validation), or None."""
    from slosched.core.errors import ConfigError
    from slosched.gateway.ops.config import parse_config

    try:
        parse_config(config)
    except ConfigError as error:
        return str(error)[:200]
    return None


@dataclass(slots=True)
class ServerProcesses:
    """The gateway and fake backend processes the suite runs against (a server launcher's handle, not the
    policy stack); ``legacy`` says the tenant config was refused (and why, ``legacy_reason``)."""

    work: Path
    backend_urls: dict[str, str]
    backends: list[subprocess.Popen[bytes]]
    gateway: subprocess.Popen[bytes] | None = None
    url: str = ""
    legacy: bool = False
    legacy_reason: str = ""
    starts: int = 0
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def faulty_url(self) -> str:
        return self.backend_urls["faulty"]

    def rss_mb(self) -> float:
        return _rss_mb(self.gateway.pid) if self.gateway is not None else float("nan")


def _spawn(command: list[str], log: Path, nofile: int | None = None) -> subprocess.Popen[bytes]:
    def limit() -> None:
        if nofile is not None:
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(nofile, hard), hard))

    with log.open("ab") as sink:  # the child keeps its own descriptor
        return subprocess.Popen(command, stdout=sink, stderr=sink, start_new_session=True, preexec_fn=limit)


def _wait_ready(url: str, process: subprocess.Popen[bytes], timeout_s: float) -> str | None:
    """None once ``url`` answers; else why not (exited, or still silent after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return f"exited with {process.returncode}"
        with contextlib.suppress(httpx.HTTPError):
            httpx.get(url, timeout=1.0)
            return None
        time.sleep(0.1)
    return f"not answering after {timeout_s:.0f} s"


def start_backends(work: Path) -> ServerProcesses:
    urls: dict[str, str] = {}
    processes: list[subprocess.Popen[bytes]] = []
    for name in ("stub", "faulty"):
        port = free_port()
        command = [sys.executable, "-m", "slosched.devtools.faulty", "--port", str(port)]
        process = _spawn(command, work / f"{name}.log")
        processes.append(process)
        urls[name] = f"http://127.0.0.1:{port}"
        problem = _wait_ready(f"{urls[name]}/health", process, START_S)
        if problem is not None:
            stop_all(ServerProcesses(work, urls, processes))
            raise RuntimeError(f"chaos: the {name} backend did not start: {problem}")
    return ServerProcesses(work, urls, processes)


def start_gateway(servers: ServerProcesses) -> None:
    """Start (or restart, on the same store) the gateway; the tenant config first, the legacy one if this
    tree refuses it. Raises RuntimeError when even the legacy gateway does not start."""
    port = free_port()
    store = servers.work / "jobs.sqlite3"
    config = gateway_config(port, servers.backend_urls, store, tenants=not servers.legacy)
    problem = None if servers.legacy else config_problem(config)
    if problem is not None:
        servers.legacy, servers.legacy_reason = True, f"tenant config refused: {problem}"
        config = gateway_config(port, servers.backend_urls, store, tenants=False)
    path = servers.work / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    log = servers.work / "gateway.log"
    process = _spawn([sys.executable, "-m", "slosched.cli", "serve", str(path)], log, GATEWAY_NOFILE)
    problem = _wait_ready(f"http://127.0.0.1:{port}/health", process, START_S)
    if problem is not None:
        _stop(process, 5.0)
        tail = log.read_text(errors="replace")[-300:] if log.exists() else ""
        raise RuntimeError(f"chaos: the gateway did not start ({problem}): {tail}")
    servers.gateway, servers.url, servers.config = process, f"http://127.0.0.1:{port}", config
    servers.starts += 1


def _stop(process: subprocess.Popen[bytes], grace_s: float) -> float | None:
    """SIGTERM, then SIGKILL after ``grace_s``; the seconds it took to exit on SIGTERM, None if killed."""
    if process.poll() is not None:
        return 0.0
    started = time.monotonic()
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
        return time.monotonic() - started
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
        return None


def stop_gateway(servers: ServerProcesses, grace_s: float) -> float | None:
    """Stop the gateway by its PID (SIGTERM, graceful); see ``_stop``."""
    if servers.gateway is None:
        return 0.0
    took = _stop(servers.gateway, grace_s)
    servers.gateway = None
    return took


def stop_all(servers: ServerProcesses) -> None:
    stop_gateway(servers, 10.0)
    for process in servers.backends:
        _stop(process, 5.0)
