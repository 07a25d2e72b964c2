"""``slosched serve`` as a child process: what the live benchmarks and tests run when the real gateway process
matters (its config loading, its own event loop, its signal handling), not an in-process ``Gateway``.

The child's stderr goes to a log file beside the config (a pipe nobody reads would block it once full); the
child is stopped by its PID (SIGTERM, then SIGKILL after a grace period), never by name.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from slosched.devtools.stub import free_port


@contextlib.contextmanager
def gateway_process(config_path: Path, start_timeout_s: float = 30.0, grace_s: float = 10.0) -> Iterator[str]:
    """Run ``slosched serve CONFIG`` on a free port until ``/health`` answers 200; yields its base URL. Raises
    RuntimeError (with the log's tail) when it exits or does not answer within ``start_timeout_s``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = config_path.with_suffix(".log")
    command = [sys.executable, "-m", "slosched.cli", "serve", str(config_path), "--port", str(port)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, cwd=config_path.parent)
    try:
        _wait_healthy(process, url, start_timeout_s, log_path)
        yield url
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(grace_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def _wait_healthy(process: subprocess.Popen[bytes], url: str, timeout_s: float, log_path: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    tail = log_path.read_text(errors="replace")[-600:] if log_path.exists() else ""
    state = f"exited with {process.returncode}" if process.poll() is not None else f"not healthy in {timeout_s:g} s"
    raise RuntimeError(f"slosched serve {state}: {tail}")
