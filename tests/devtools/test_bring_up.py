"""``devtools.bring_up.run_up`` with start/wait/stop faked (no real servers): it prints the ready gateway config,
writes it when asked, blocks until SIGINT/SIGTERM or a server dies, always stops the servers it started
and restores the previous signal handlers."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from slosched.devtools import bring_up


class FakeProcess:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode


def fake_server(name: str, port: int, pid: int) -> Any:
    return SimpleNamespace(name=name, url=f"http://127.0.0.1:{port}", process=FakeProcess(pid))


class Fakes:
    """Records what ``run_up`` asked for; ``on_sleep`` runs on every wait tick of its loop."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, on_sleep: Any) -> None:
        self.servers = [fake_server("vllm-0", 8001, 101), fake_server("vllm-1", 8002, 102)]
        self.started: list[tuple[str, Sequence[int], Any]] = []
        self.waited: list[list[str]] = []
        self.stopped: list[list[int]] = []
        self.ticks = 0

        def start_servers(layers: Sequence[int], work_dir: Path, priority: bool = True) -> list[Any]:
            self.started.append(("plain", list(layers), priority))
            return self.servers

        def start_plugin_servers(layers: Sequence[int], work_dir: Path, policy: str) -> list[Any]:
            self.started.append(("plugin", list(layers), policy))
            return [SimpleNamespace(server=server) for server in self.servers]

        def sleep(seconds: float) -> None:
            self.ticks += 1
            assert self.ticks < 50, "run_up did not stop"
            on_sleep(self)

        monkeypatch.setattr(bring_up, "start_servers", start_servers)
        monkeypatch.setattr(bring_up, "start_plugin_servers", start_plugin_servers)
        monkeypatch.setattr(bring_up, "wait_ready", lambda servers: self.waited.append([s.name for s in servers]))
        monkeypatch.setattr(
            bring_up, "stop_servers", lambda servers: self.stopped.append([s.process.pid for s in servers])
        )
        monkeypatch.setattr(bring_up, "time", SimpleNamespace(sleep=sleep))


def signal_after(ticks: int, sig: signal.Signals) -> Any:
    def on_sleep(fakes: Fakes) -> None:
        if fakes.ticks == ticks:
            signal.raise_signal(sig)

    return on_sleep


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_servers_by_pid(
    sig: signal.Signals, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    fakes = Fakes(monkeypatch, signal_after(3, sig))
    config_out = tmp_path / "gateway.yaml"
    assert bring_up.run_up([2, 8], tmp_path, config_out, gateway_port=9100) == 0
    assert fakes.started == [("plain", [2, 8], True)]
    assert fakes.waited == [["vllm-0", "vllm-1"]]
    assert fakes.stopped == [[101, 102]] and fakes.ticks == 3
    out, err = capsys.readouterr()
    config = yaml.safe_load(out)
    assert config["port"] == 9100
    assert [(b["name"], b["url"]) for b in config["backends"]] == [
        ("vllm-0", "http://127.0.0.1:8001"),
        ("vllm-1", "http://127.0.0.1:8002"),
    ]
    assert yaml.safe_load(config_out.read_text()) == config
    assert "pids [101, 102]" in err and f"config written to {config_out}" in err
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_dying_server_stops_the_others(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def on_sleep(fakes: Fakes) -> None:
        if fakes.ticks == 2:
            fakes.servers[1].process.returncode = -9

    fakes = Fakes(monkeypatch, on_sleep)
    assert bring_up.run_up([4], tmp_path, None, gateway_port=8080, engine_policy="saber") == 1
    assert fakes.started == [("plugin", [4], "saber")]
    assert fakes.stopped == [[101, 102]]
    out, err = capsys.readouterr()
    assert yaml.safe_load(out)["backends"][0]["name"] == "vllm-0"
    assert "vllm-1 exited (-9); stopping the others" in err and "config written" not in err


def test_servers_are_stopped_when_start_up_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fakes = Fakes(monkeypatch, lambda _: None)

    def wait_ready(servers: Sequence[Any]) -> None:
        raise RuntimeError("vllm-0 did not become ready")

    monkeypatch.setattr(bring_up, "wait_ready", wait_ready)
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(RuntimeError, match="did not become ready"):
        bring_up.run_up([2], tmp_path, None, gateway_port=8080, priority=False)
    assert fakes.started == [("plain", [2], False)]
    assert fakes.stopped == [[101, 102]]
    assert signal.getsignal(signal.SIGINT) == before
