"""``slosched up``: local vLLM CPU servers serving generated tiny models of different depths.

Each server runs ``python -m vllm.entrypoints.openai.api_server`` from the vLLM virtualenv in its own process
group (``start_new_session``), pinned to one core (``VLLM_CPU_OMP_THREADS_BIND``), with
``VLLM_CPU_KVCACHE_SPACE=1`` and the Responses API's store on; ``stop`` signals exactly those process groups by
PID (SIGTERM, then SIGKILL after a grace period), never by name. Heterogeneity comes from model depth: more
layers, slower "GPU".
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

import httpx

from slosched.core.errors import ConfigError

SERVED_MODEL_NAME = "tiny"
_TINY_MODEL_SCRIPT = Path(__file__).with_name("tiny_model.py")


def default_vllm_python() -> Path:
    """The vLLM virtualenv's interpreter: ``$SLOSCHED_VLLM_PYTHON`` or ``.venv-vllm`` of the checkout."""
    override = os.environ.get("SLOSCHED_VLLM_PYTHON")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[3] / ".venv-vllm" / "bin" / "python"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def generate_tiny_model(python: Path, out_dir: Path, layers: int, timeout_s: float = 300.0) -> Path:
    """Write a tiny model with ``layers`` layers to ``out_dir`` (skipped when it already exists)."""
    if (out_dir / "config.json").is_file() and (out_dir / "tokenizer.json").is_file():
        return out_dir
    subprocess.run(
        [str(python), str(_TINY_MODEL_SCRIPT), str(out_dir), "--layers", str(layers)],
        check=True,
        timeout=timeout_s,
        cwd=out_dir.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return out_dir


class ServerAddress(Protocol):
    """What a gateway config needs of a server: a name and a base URL."""

    @property
    def name(self) -> str: ...
    @property
    def url(self) -> str: ...


@dataclass(slots=True)
class VllmServer:
    """One launched server: its process (group leader), port, model depth and log file."""

    name: str
    port: int
    layers: int
    process: subprocess.Popen[bytes]
    log_path: Path
    cpu: int
    log_file: IO[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _server_command(python: Path, model_dir: Path, port: int, priority: bool) -> list[str]:
    command = [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        SERVED_MODEL_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        "2048",
        "--dtype",
        "bfloat16",
        "--gpu-memory-utilization",
        "0.3",
    ]
    if priority:
        command += ["--scheduling-policy", "priority"]
    return command


ServerEnv = Callable[[int, Path], Mapping[str, str]]


def start_servers(
    layers: Sequence[int],
    work_dir: Path,
    python: Path | None = None,
    priority: bool = True,
    ports: Sequence[int] | None = None,
    *,
    extra_args: Sequence[str] = (),
    server_env: ServerEnv | None = None,
    name: str = "vllm",
    own_dirs: bool = False,
    first_cpu: int = 0,
) -> list[VllmServer]:
    """Start one server per entry of ``layers`` (all at once; readiness is awaited by ``wait_ready``).

    Server ``i`` (name ``{name}-{i}-l{depth}``) is pinned to core ``(first_cpu + i) % cores`` and runs
    vLLM's OpenAI server followed by ``extra_args``, with ``server_env(i, folder)`` added to its
    environment. Its folder (working directory) is ``work_dir`` with log ``{name}-{i}.log``, or with
    ``own_dirs`` its own ``work_dir/{name}-{i}`` with log ``vllm.log``, where per-server files belong (the
    scheduler plugin's state and control files). On any failure the servers already started are stopped."""
    python = python or default_vllm_python()
    if not python.exists():
        raise ConfigError("vllm python", f"{python} not found; run `make vllm-venv` (see docs/serving.md)")
    work_dir.mkdir(parents=True, exist_ok=True)
    num_cpus = os.cpu_count() or 1
    servers: list[VllmServer] = []
    try:
        for index, depth in enumerate(layers):
            model_dir = generate_tiny_model(python, work_dir / f"tiny-l{depth}", depth)
            folder = work_dir / f"{name}-{index}" if own_dirs else work_dir
            folder.mkdir(exist_ok=True)
            cpu = (first_cpu + index) % num_cpus
            env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND=str(cpu))
            # The Responses API's stored responses (its follow-ups and reads; off by default in vLLM, which
            # keeps them in memory until it stops: fine for these local servers).
            env.setdefault("VLLM_ENABLE_RESPONSES_API_STORE", "1")
            if server_env is not None:
                env.update(server_env(index, folder))
            port = ports[index] if ports else free_port()
            log_path = folder / "vllm.log" if own_dirs else work_dir / f"{name}-{index}.log"
            log_file = log_path.open("wb")
            try:
                process = subprocess.Popen(
                    [*_server_command(python, model_dir, port, priority), *extra_args],
                    cwd=folder,  # never inside the vllm package folder
                    env=env,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # own process group: stop() reaches the engine-core children
                )
            except BaseException:
                log_file.close()  # no server owns it yet
                raise
            servers.append(VllmServer(f"{name}-{index}-l{depth}", port, depth, process, log_path, cpu, log_file))
    except BaseException:
        stop_servers(servers)
        raise
    return servers


def wait_ready(servers: Sequence[VllmServer], timeout_s: float = 600.0) -> None:
    """Block until every server answers ``GET /v1/models``; raises with the log tail on failure."""
    deadline = time.monotonic() + timeout_s
    pending = list(servers)
    while pending:
        for server in list(pending):
            if server.process.poll() is not None:
                raise RuntimeError(f"{server.name} exited ({server.process.returncode}):\n{_tail(server.log_path)}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{server.url}/v1/models", timeout=2.0).status_code == 200:
                    pending.remove(server)
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"{pending[0].name} not ready after {timeout_s:.0f} s:\n{_tail(pending[0].log_path)}")
        if pending:
            time.sleep(1.0)


def stop_servers(servers: Sequence[VllmServer], grace_s: float = 20.0) -> None:
    """SIGTERM each server's process group (by its PID), wait, then SIGKILL what is left. Idempotent."""
    for server in servers:
        if server.process.poll() is None:
            _signal_group(server.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for server in servers:
        remaining = max(deadline - time.monotonic(), 0.1)
        try:
            server.process.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            _signal_group(server.process.pid, signal.SIGKILL)
            server.process.wait(timeout=10)
        _signal_group(server.process.pid, signal.SIGKILL)  # orphaned children of the group, if any
        if server.log_file is not None:
            server.log_file.close()
            server.log_file = None


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # pid == pgid: the server was started with start_new_session


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def gateway_config(servers: Sequence[ServerAddress], port: int = 8080, **policies: Any) -> dict[str, Any]:
    """The ready ``slosched serve`` config for ``servers`` (forwarding priority, as they run priority)."""
    return {
        "host": "127.0.0.1",
        "port": port,
        "backends": [
            {"name": s.name, "url": s.url, "model": SERVED_MODEL_NAME, "max_concurrency": 16, "forward_priority": True}
            for s in servers
        ],
        "policies": dict(policies) or {"router": "least-tokens", "engine": "chunked-fcfs", "job": "deadline"},
    }


def parse_layers(text: str, count: int) -> list[int]:
    """``"2,8"`` -> depths, cycled to ``count`` servers; each must be an integer in [1, 64]."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise ConfigError("--layers", f"expected comma-separated integers, got {text!r}") from error
    if not values or any(not 1 <= value <= 64 for value in values):
        raise ConfigError("--layers", f"each depth must be in [1, 64], got {text!r}")
    if count < 1:
        raise ConfigError("N", f"number of servers must be >= 1, got {count}")
    return [values[index % len(values)] for index in range(count)]
