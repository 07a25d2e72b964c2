"""Start vLLM CPU servers with slosched's scheduler plugin (for ``slosched up --engine-policy NAME``,
the plugin tests and ``slosched bench engine-live``).

Builds on ``serve.up.start_servers`` (tiny model generation, free ports, core pinning, own process group;
``wait_ready`` and stop by PID): each server is ``python -m vllm.entrypoints.openai.api_server ...
--scheduler-cls CLASS`` with ``$SLOSCHED_ENGINE_CONFIG`` naming the policy, a state file, a control file
and (optionally) a step log in the server's own folder. The EngineCore process inherits the environment.
``--scheduling-policy priority`` stays on so clients (and the gateway) may send vLLM priorities; the
plugin orders the queue itself and priorities only pick preemption victims.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slosched.contract import XARGS_KEY_ENV
from slosched.core.errors import ConfigError
from slosched.devtools.up import VllmServer, start_servers, stop_servers
from slosched.policies.engine.base import ENGINE_PRESETS
from slosched.vllm_ext.config import CONFIG_ENV

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


def plugin_config(
    work_dir: Path, engine_policy: str | None, extra: Mapping[str, Any] | None = None, step_log: bool = False
) -> dict[str, Any]:
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
    ``serve.up.start_servers`` launches them, each in its own folder ``work_dir/plugin-<i>`` holding its
    log and the plugin's files; ``server_args`` are extra vLLM arguments (e.g. ``--max-num-seqs 8``)."""
    plugin_config(work_dir, engine_policy, extra_config, step_log)  # a bad preset fails before any start-up
    configs: dict[int, dict[str, Any]] = {}
    # The plugin believes only signed metadata: the servers and this process's gateways share one key.
    os.environ.setdefault(XARGS_KEY_ENV, secrets.token_hex(32))

    def server_env(index: int, folder: Path) -> dict[str, str]:
        configs[index] = plugin_config(folder, engine_policy, extra_config, step_log)
        return {CONFIG_ENV: json.dumps(configs[index])}

    servers = start_servers(
        layers,
        work_dir,
        python,
        priority=True,
        extra_args=["--scheduler-cls", SCHEDULER_CLASS, *server_args],
        server_env=server_env,
        name="plugin",
        own_dirs=True,
        first_cpu=first_cpu,
    )
    started: list[PluginServer] = []
    for index, server in enumerate(servers):
        config = configs[index]
        step_file = Path(config["step_log_file"]) if step_log else None
        started.append(PluginServer(server, Path(config["state_file"]), Path(config["control_file"]), step_file))
    return started


def stop_plugin_servers(servers: Sequence[PluginServer]) -> None:
    stop_servers([plugin.server for plugin in servers])
