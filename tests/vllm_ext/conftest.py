"""Fixtures for the plugin's real-vLLM tests: the vLLM virtualenv's Python, a tiny model, and ONE vLLM
CPU server running the plugin for the whole session (policies are switched through its control file, so
one server covers every policy). Set ``SLOSCHED_PLUGIN_SERVER`` to a JSON file describing a running
server (``url``, ``state``, ``control``, ``steps``) to reuse it in a development loop."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from slosched.devtools.up import generate_tiny_model, wait_ready


@dataclass(frozen=True)
class LivePlugin:
    url: str
    state_file: Path
    control_file: Path
    step_log_file: Path


@pytest.fixture(scope="session")
def tiny_model_dir(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_tiny_model(vllm_python, tmp_path_factory.mktemp("vllm-ext-model") / "tiny-l2", 2)


@pytest.fixture(scope="session")
def plugin_server(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LivePlugin]:
    existing = os.environ.get("SLOSCHED_PLUGIN_SERVER")
    if existing:
        info = json.loads(Path(existing).read_text())
        yield LivePlugin(info["url"], Path(info["state"]), Path(info["control"]), Path(info["steps"]))
        return
    from slosched.devtools.vllm_launch import start_plugin_servers, stop_plugin_servers

    extra = {"control_poll_s": 0.05, "export_interval_s": 0.2}
    work = tmp_path_factory.mktemp("vllm-ext-server")
    servers = start_plugin_servers([2], work, None, extra, python=vllm_python, step_log=True, first_cpu=1)
    try:
        wait_ready([servers[0].server], timeout_s=900)
        plugin = servers[0]
        assert plugin.step_log_file is not None
        yield LivePlugin(plugin.url, plugin.state_file, plugin.control_file, plugin.step_log_file)
    finally:
        stop_plugin_servers(servers)
