"""``slosched up``: start vLLM servers (plain, or with slosched's scheduler plugin), print the ready gateway
config and keep them until SIGINT/SIGTERM. Built on ``up`` (plain servers) and ``vllm_launch`` (plugin
servers), which is why it lives apart from both."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from slosched.devtools.up import VllmServer, gateway_config, start_servers, stop_servers, wait_ready
from slosched.devtools.vllm_launch import start_plugin_servers
from slosched.policies.spec import PolicyPair


def print_to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_up(
    layers: Sequence[int],
    work_dir: Path,
    config_out: Path | None,
    gateway_port: int,
    priority: bool = True,
    engine_policy: str | None = None,
    policy: str | None = None,
) -> int:
    """Start servers, print the ready gateway config (YAML), block until SIGINT/SIGTERM, stop them by PID.

    ``engine_policy`` starts vLLM with slosched's scheduler plugin running that engine preset. ``policy``
    (``ROUTER+ENGINE`` or a stack name) goes into the gateway config; a stack also runs its engine preset
    in the plugin unless ``engine_policy`` says otherwise, so its deadlines reach the engine too.
    """
    import yaml

    stop_requested: list[int] = []

    def request_stop(signum: int, frame: object) -> None:
        stop_requested.append(signum)

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    servers: list[VllmServer] = []
    policies = gateway_policies(policy) if policy else {}
    if policy and engine_policy is None and "stack" in policies:
        engine_policy = PolicyPair.parse(policy).engine
    try:
        if engine_policy:
            servers = [plugin.server for plugin in start_plugin_servers(layers, work_dir, engine_policy)]
        else:
            servers = start_servers(layers, work_dir, priority=priority)
        print_to_stderr(
            f"starting {len(servers)} vLLM servers (pids {[s.process.pid for s in servers]}); logs in {work_dir}"
        )
        wait_ready(servers)
        text = yaml.safe_dump(gateway_config(servers, port=gateway_port, **policies), sort_keys=False)
        if config_out is not None:
            config_out.write_text(text)
            print_to_stderr(f"ready; config written to {config_out}: run `slosched serve {config_out}`")
        print(text, flush=True)
        while not stop_requested:
            dead = [s for s in servers if s.process.poll() is not None]
            if dead:
                print_to_stderr(f"{dead[0].name} exited ({dead[0].process.returncode}); stopping the others")
                return 1
            time.sleep(0.5)
        return 0
    finally:
        stop_servers(servers)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def gateway_policies(policy: str) -> dict[str, str]:
    """The gateway config's ``policies`` section for ``ROUTER+ENGINE`` or a stack name (validated)."""
    pair = PolicyPair.parse(policy)
    if pair.stack is not None:
        return {"stack": pair.stack}
    return {"router": pair.router, "engine": pair.engine, "job": "deadline"}
