"""``slosched bench gateway``: latency the gateway adds in front of a backend, its max request rate, and
the same for the peer router (vllm-router, from PyPI) — all against the same stub backend.

Each server runs in its own process (stub, slosched gateway, vllm-router) and the load generator in this
one, all on the same machine: figures include the CPU contention of sharing its cores. Added latency is
the p50/p99 through the router minus the p50/p99 straight to the stub at the same open-loop rate.
``max_rps`` is the completion rate of a closed loop with 64 concurrent clients. The soak figure is the
gateway's resident-memory growth over the whole run (after a warm-up).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from slosched.bench.common import print_figures
from slosched.bench.loadgen import LoadResult, closed_loop, open_loop
from slosched.serve.stub import free_port

_BODY = json.dumps({"model": "tiny", "prompt": "hello", "max_tokens": 8}).encode()
_PATH = "/v1/completions"
_PEER_VENV = Path("reports/peer-venv")
_RESULTS = Path("docs/results")


def wait_http(url: str, process: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        time.sleep(0.2)
    raise TimeoutError(f"{url} not ready after {timeout_s:.0f} s")


@contextlib.contextmanager
def _process(command: list[str], ready_url: str) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``command`` in its own process group, wait for ``ready_url``, stop it by PID on exit."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_http(ready_url, process)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def peer_router(install: bool) -> tuple[Path | None, str]:
    """(path to the vllm-router executable, description or reason it is unavailable)."""
    executable = _PEER_VENV / "bin" / "vllm-router"
    if not executable.exists() and install:
        try:
            subprocess.run([sys.executable, "-m", "venv", str(_PEER_VENV)], check=True, timeout=120)
            subprocess.run([str(_PEER_VENV / "bin" / "pip"), "install", "-q", "vllm-router"], check=True,
                           timeout=600, capture_output=True)  # fmt: skip
        except (subprocess.SubprocessError, OSError) as error:
            return None, f"`pip install vllm-router` failed: {error}"
    if not executable.exists():
        return None, f"vllm-router not installed in {_PEER_VENV} (the full bench installs it from PyPI)"
    version = subprocess.run([str(_PEER_VENV / "bin" / "pip"), "show", "vllm-router"], capture_output=True, text=True)
    line = next((text for text in version.stdout.splitlines() if text.startswith("Version:")), "Version: ?")
    return executable, f"vllm-router {line.split(':', 1)[1].strip()} (PyPI, Rust), --policy round_robin"


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def _added(via: LoadResult, direct: LoadResult) -> dict[str, float]:
    return {
        "added_p50_ms": via.percentile_ms(50) - direct.percentile_ms(50),
        "added_p99_ms": via.percentile_ms(99) - direct.percentile_ms(99),
        "p50_ms": via.percentile_ms(50),
        "p99_ms": via.percentile_ms(99),
        "errors": float(via.errors),
    }


def _measure(url: str, direct: LoadResult, rate: float, duration_s: float) -> dict[str, float]:
    asyncio.run(open_loop(url, _PATH, _BODY, rate / 4, 1.0))  # warm-up: connections, caches
    via = asyncio.run(open_loop(url, _PATH, _BODY, rate, duration_s))
    figures = _added(via, direct)
    figures["max_rps"] = asyncio.run(closed_loop(url, _PATH, _BODY, 64, duration_s)).throughput
    return figures


def _gateway_config(path: Path, stub_url: str, port: int) -> None:
    config = {
        "port": port,
        "backends": [{"name": "stub", "url": stub_url, "max_concurrency": 4096, "max_queue": 65536}],
        "policies": {"router": "round-robin", "engine": "chunked-fcfs"},
    }
    path.write_text(json.dumps(config))  # JSON is YAML


def run(quick: bool) -> dict[str, Any]:
    rate, duration_s = (300.0, 4.0) if quick else (1000.0, 15.0)
    stub_port, gateway_port, peer_port = free_port(), free_port(), free_port()
    stub_url = f"http://127.0.0.1:{stub_port}"
    config_path = Path(f"/tmp/slosched-bench-gateway-{gateway_port}.json")
    _gateway_config(config_path, stub_url, gateway_port)
    figures: dict[str, Any] = {"rate_rps": rate, "duration_s": duration_s}
    stub_cmd = [sys.executable, "-m", "slosched.serve.stub", "--port", str(stub_port)]
    gateway_cmd = [sys.executable, "-m", "slosched.cli", "serve", str(config_path)]
    with _process(stub_cmd, f"{stub_url}/health"):
        asyncio.run(open_loop(stub_url, _PATH, _BODY, rate / 4, 1.0))
        direct = asyncio.run(open_loop(stub_url, _PATH, _BODY, rate, duration_s))
        figures["direct_p50_ms"], figures["direct_p99_ms"] = direct.percentile_ms(50), direct.percentile_ms(99)
        with _process(gateway_cmd, f"http://127.0.0.1:{gateway_port}/health") as gateway:
            gateway_url = f"http://127.0.0.1:{gateway_port}"
            asyncio.run(open_loop(gateway_url, _PATH, _BODY, rate / 4, 1.0))
            rss_before = _rss_mb(gateway.pid)
            figures.update(_measure(gateway_url, direct, rate, duration_s))
            figures["gateway_rss_growth_mb"] = _rss_mb(gateway.pid) - rss_before
        figures["peer"] = _peer_figures(stub_url, peer_port, direct, rate, duration_s, install=not quick)
    config_path.unlink(missing_ok=True)
    print_figures("gateway overhead (stub backend)", {k: v for k, v in figures.items() if k != "peer"})
    print_figures("peer", figures["peer"])
    if not quick:
        _write_report(figures)
    return figures


def _peer_figures(
    stub_url: str, port: int, direct: LoadResult, rate: float, duration_s: float, install: bool
) -> dict[str, Any]:
    executable, description = peer_router(install)
    if executable is None:
        return {"available": False, "reason": description}
    command = [str(executable), "--host", "127.0.0.1", "--port", str(port), "--worker-urls", stub_url,
               "--policy", "round_robin", "--log-level", "error"]  # fmt: skip
    try:
        with _process(command, f"http://127.0.0.1:{port}/health"):
            figures: dict[str, Any] = _measure(f"http://127.0.0.1:{port}", direct, rate, duration_s)
    except (RuntimeError, TimeoutError) as error:
        return {"available": False, "reason": f"{description}: did not start ({error})"}
    return {"available": True, "name": description, **figures}


def _write_report(figures: dict[str, Any]) -> None:
    peer = figures["peer"]
    rows = [("slosched gateway", figures)] + ([("vllm-router (peer)", peer)] if peer.get("available") else [])
    lines = [
        "# Gateway overhead (`slosched bench gateway`)",
        "",
        f"Stub backend (8-token completions), open loop at {figures['rate_rps']:.0f} req/s for "
        f"{figures['duration_s']:.0f} s; direct to the stub: p50 {figures['direct_p50_ms']:.2f} ms, "
        f"p99 {figures['direct_p99_ms']:.2f} ms. Everything (stub, router, load generator) shares this machine's "
        "cores. Goal: added p50 <= 1 ms, p99 <= 5 ms at 1,000 req/s.",
        "",
        "| router | added p50 (ms) | added p99 (ms) | max req/s (64 clients) | errors |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in rows:
        lines.append(
            f"| {name} | {row['added_p50_ms']:.2f} | {row['added_p99_ms']:.2f} | {row['max_rps']:.0f} | "
            f"{row['errors']:.0f} |"
        )
    if not peer.get("available"):
        lines += ["", f"Peer unavailable: {peer['reason']}"]
    lines += ["", f"Gateway resident memory growth over the run: {figures['gateway_rss_growth_mb']:.1f} MB."]
    _RESULTS.mkdir(parents=True, exist_ok=True)
    (_RESULTS / "gateway.md").write_text("\n".join(lines) + "\n")
