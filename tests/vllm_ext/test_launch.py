"""Server launch without vLLM: ``serve.up.start_servers`` and the plugin launcher built on it, run against a
fake interpreter that writes a tiny "model" and, as a "server", prints its working folder, core pinning,
plugin config and arguments to its log, then sleeps until it is stopped by PID."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from slosched.core.errors import ConfigError
from slosched.devtools.up import VllmServer, start_servers, stop_servers
from slosched.devtools.vllm_launch import SCHEDULER_CLASS, start_plugin_servers, stop_plugin_servers

_FAKE = """#!{python}
import json, os, pathlib, sys, time
if sys.argv[1] == "-m":
    env = {{key: os.environ.get(key) for key in ("VLLM_CPU_OMP_THREADS_BIND", "SLOSCHED_ENGINE_CONFIG")}}
    print(json.dumps({{"cwd": os.getcwd(), "env": env, "argv": sys.argv[1:]}}), flush=True)
    time.sleep(120)
else:
    out = pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json"):
        (out / name).write_text("{{}}")
"""


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    path = tmp_path / "fake-python"
    path.write_text(_FAKE.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _report(server: VllmServer) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while not server.log_path.read_text().strip():
        assert time.monotonic() < deadline, f"{server.name} wrote nothing"
        time.sleep(0.02)
    report: dict[str, Any] = json.loads(server.log_path.read_text().splitlines()[0])
    return report


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_start_servers_defaults(fake_python: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    servers = start_servers([2, 8], work, python=fake_python, priority=False)
    try:
        reports = [_report(server) for server in servers]
    finally:
        stop_servers(servers)
    cores = os.cpu_count() or 1
    assert [s.name for s in servers] == ["vllm-0-l2", "vllm-1-l8"]
    assert [s.log_path for s in servers] == [work / "vllm-0.log", work / "vllm-1.log"]
    assert [s.cpu for s in servers] == [0, 1 % cores]
    for server, report in zip(servers, reports, strict=True):
        assert report["cwd"] == str(work) and report["env"]["VLLM_CPU_OMP_THREADS_BIND"] == str(server.cpu)
        assert report["env"]["SLOSCHED_ENGINE_CONFIG"] is None
        argv = report["argv"]
        assert _value(argv, "--model") == str(work / f"tiny-l{server.layers}")
        assert _value(argv, "--port") == str(server.port) and "--scheduling-policy" not in argv
        assert server.process.poll() is not None  # stopped by PID


def test_plugin_servers_build_on_start_servers(fake_python: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    extra = {"control_poll_s": 0.05}
    plugins = start_plugin_servers(
        [2], work, "lens", extra, python=fake_python, step_log=True, first_cpu=1, server_args=["--max-num-seqs", "8"]
    )
    try:
        report = _report(plugins[0].server)
    finally:
        stop_plugin_servers(plugins)
    plugin, folder = plugins[0], work / "plugin-0"
    assert plugin.name == "plugin-0-l2" and plugin.server.log_path == folder / "vllm.log"
    assert plugin.server.cpu == 1 % (os.cpu_count() or 1) and report["cwd"] == str(folder)
    assert report["env"]["VLLM_CPU_OMP_THREADS_BIND"] == str(plugin.server.cpu)
    config = json.loads(report["env"]["SLOSCHED_ENGINE_CONFIG"])
    assert config["preset"] == "lens" and config["control_poll_s"] == 0.05
    assert (plugin.state_file, plugin.control_file, plugin.step_log_file) == (
        folder / "engine-state.json",
        folder / "engine-control.json",
        folder / "engine-steps.jsonl",
    )
    assert Path(config["state_file"]) == plugin.state_file and Path(config["step_log_file"]) == plugin.step_log_file
    argv = report["argv"]
    assert _value(argv, "--scheduling-policy") == "priority"
    assert argv[-4:] == ["--scheduler-cls", SCHEDULER_CLASS, "--max-num-seqs", "8"]
    assert plugin.server.process.poll() is not None


def test_unknown_engine_policy_fails_before_anything_starts(fake_python: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    with pytest.raises(ConfigError, match="--engine-policy"):
        start_plugin_servers([2], work, "no-such-preset", python=fake_python)
    assert not (work / "tiny-l2").exists()
