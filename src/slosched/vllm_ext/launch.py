"""Start vLLM CPU servers with slosched's scheduler plugin (for ``slosched up --engine-policy NAME``,
the plugin tests and ``slosched bench engine-live``).

Builds on ``serve.up`` (tiny model generation, free ports, readiness, stop by process group): each server
is ``python -m vllm.entrypoints.openai.api_server ... --scheduler-cls CLASS`` with
``$SLOSCHED_ENGINE_CONFIG`` naming the policy, a state file, a control file and (optionally) a step log in
the server's work folder. The EngineCore process inherits the environment. ``--scheduling-policy
priority`` stays on so clients (and the gateway) may send vLLM priorities; the plugin orders the queue
itself and priorities only pick preemption victims.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slosched.core.errors import ConfigError
from slosched.policies.engine.base import ENGINE_PRESETS
from slosched.serve.up import (
    SERVED_MODEL_NAME,
    VllmServer,
    default_vllm_python,
    free_port,
    generate_tiny_model,
    stop_servers,
)

SCHEDULER_CLASS = "slosched.vllm_ext.scheduler.SloschedScheduler"


@dataclass(slots=True)
class PluginServer:
    """A vLLM server running the plugin, with the files the plugin reads and writes."""

    server: VllmServer
    state_file: Path
    control_file: Path
    step_log_file: Path | None

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def name(self) -> str:
        return self.server.name


def plugin_config(work_dir: Path, engine_policy: str | None, extra: Mapping[str, Any] | None = None,
                  step_log: bool = False) -> dict[str, Any]:  # fmt: skip
    """The ``$SLOSCHED_ENGINE_CONFIG`` document; ``engine_policy`` is a preset name (None: FCFS, chunked)."""
    if engine_policy is not None and engine_policy not in ENGINE_PRESETS:
        raise ConfigError("--engine-policy", f"unknown preset {engine_policy!r}; known: {ENGINE_PRESETS.names()}")
    config: dict[str, Any] = {
        "state_file": str(work_dir / "engine-state.json"),
        "control_file": str(work_dir / "engine-control.json"),
        "export_interval_s": 0.5,
    }
    if engine_policy is not None:
        config["preset"] = engine_policy
    if step_log:
        config["step_log_file"] = str(work_dir / "engine-steps.jsonl")
    config.update(extra or {})
    return config


def plugin_server_command(python: Path, model_dir: Path, port: int, scheduler_cls: str = SCHEDULER_CLASS) -> list[str]:
    return [
        str(python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir), "--served-model-name", SERVED_MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", "2048", "--dtype", "bfloat16", "--gpu-memory-utilization", "0.3",
        "--scheduling-policy", "priority", "--scheduler-cls", scheduler_cls,
    ]  # fmt: skip


def start_plugin_servers(
    layers: Sequence[int],
    work_dir: Path,
    engine_policy: str | None = None,
    extra_config: Mapping[str, Any] | None = None,
    python: Path | None = None,
    step_log: bool = False,
    first_cpu: int = 0,
    server_args: Sequence[str] = (),
) -> list[PluginServer]:
    """One plugin server per entry of ``layers`` (all started at once; await them with
    ``serve.up.wait_ready([s.server for s in servers])`` and stop them with ``stop_plugin_servers``).
    ``server_args`` are extra vLLM arguments (e.g. ``--max-num-seqs 8``)."""
    python = python or default_vllm_python()
    if not python.exists():
        raise ConfigError("vllm python", f"{python} not found; run `make vllm-venv` (see docs/vllm-plugin.md)")
    work_dir.mkdir(parents=True, exist_ok=True)
    num_cpus = os.cpu_count() or 1
    started: list[PluginServer] = []
    try:
        for index, depth in enumerate(layers):
            model_dir = generate_tiny_model(python, work_dir / f"tiny-l{depth}", depth)
            server_dir = work_dir / f"plugin-{index}"
            server_dir.mkdir(exist_ok=True)
            config = plugin_config(server_dir, engine_policy, extra_config, step_log)
            cpu = (first_cpu + index) % num_cpus
            env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND=str(cpu),
                       SLOSCHED_ENGINE_CONFIG=json.dumps(config))  # fmt: skip
            port = free_port()
            log_path = server_dir / "vllm.log"
            log_file = log_path.open("wb")
            process = subprocess.Popen(
                [*plugin_server_command(python, model_dir, port), *server_args],
                cwd=server_dir,  # never inside the vllm package folder
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: stopped by PID with its EngineCore child
            )
            server = VllmServer(f"plugin-{index}-l{depth}", port, depth, process, log_path, cpu, log_file)
            step_file = Path(config["step_log_file"]) if step_log else None
            started.append(PluginServer(server, Path(config["state_file"]), Path(config["control_file"]), step_file))
    except BaseException:
        stop_plugin_servers(started)
        raise
    return started


def stop_plugin_servers(servers: Sequence[PluginServer]) -> None:
    stop_servers([plugin.server for plugin in servers])
