"""Ctrl-C in long commands: stops at once, writes what finished marked partial, exits 130, no traceback;
output paths and a Ray address are checked before any work."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from slosched.cli.main import run
from tests.planning.test_sweep import SMALL
from tests.procs import GROUP, group_cpu_s, live_pids
from tests.scenario.test_config import BASE

_ENV = {**os.environ, "SLOSCHED_NATIVE": "0", "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}


def _scenario(tmp_path: Path, data: dict[str, Any], num_jobs: int) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({**data, "workload": {**data["workload"], "num_jobs": num_jobs}}))
    return path


def _interrupted(argv: list[str], tmp_path: Path, after_cpu_s: float = 6.0) -> tuple[float, str, str, int]:
    """Run the CLI, SIGINT it once its processes have used ``after_cpu_s`` of CPU (past the imports, about 2.5 s
    of it: the work has begun), and return (seconds from the signal to its exit, stdout, stderr, return code);
    fails if any process of its group remains. CPU time rather than wall time: while other work held both
    cores, 6 s of wall time once ended before the interpreter had set up (no output, killed by the signal)."""
    command = [sys.executable, "-m", "slosched.cli", *argv]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=_ENV,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300.0
    while group_cpu_s(process.pid) < after_cpu_s and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, "finished before the signal: make the workload larger"
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    try:
        out, err = process.communicate(timeout=30)
    finally:
        if _group_alive(process.pid):  # never leave a stray worker behind a failed test
            os.killpg(process.pid, signal.SIGKILL)
    stopped_s = time.monotonic() - sent
    assert not _group_alive(process.pid), "a worker outlived the command"
    return stopped_s, out, err, process.returncode


def _group_alive(group: int) -> bool:
    return any(live_pids(GROUP, group))


def test_sigint_stops_compare_at_once_and_exits_130(tmp_path: Path) -> None:
    path = _scenario(tmp_path, BASE, 30_000)
    stopped_s, out, err, code = _interrupted(["compare", str(path), "--json"], tmp_path)
    assert code == 130 and "Traceback" not in err, err
    assert stopped_s < 2.0, stopped_s
    assert err.strip().splitlines()[-1].startswith("error: interrupted"), err
    if out.strip():  # a policy run had finished: its figures, marked partial
        assert json.loads(out.strip().splitlines()[-1])["partial"] is True


def test_sigint_stops_a_sweep_and_its_workers(tmp_path: Path) -> None:
    # About a minute of work on 2 cores here: 4 seeds of 400 jobs (8 s) finished before the signal on a faster
    # CI machine, which then caught Ctrl-C while writing the complete document.
    path = _scenario(tmp_path, SMALL, 3000)
    argv = ["sweep", str(path), "--seeds", "8", "--jobs", "3000", "--workers", "2", "--out", str(tmp_path / "out")]
    stopped_s, _, err, code = _interrupted(argv, tmp_path)
    assert code == 130 and "Traceback" not in err, err
    assert stopped_s < 2.0, stopped_s
    document = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert document["partial"] is True and "partial" in document["title"]


def test_compare_writes_the_finished_runs_marked_partial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import slosched.experiment as experiment

    real, calls = experiment.simulate, []

    def second_is_interrupted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(experiment, "simulate", second_is_interrupted)
    path, report = _scenario(tmp_path, BASE, 20), tmp_path / "report"
    assert run(["compare", str(path), "--json", "--report", str(report)]) == 130
    captured = capsys.readouterr()
    document = json.loads(captured.out.strip().splitlines()[-1])
    assert document["partial"] is True and len(document["policies"]) == 1
    assert "(partial: interrupted)" in captured.out and "PARTIAL (interrupted)" in (report / "report.md").read_text()
    assert captured.err.strip().splitlines()[-1].startswith("error: interrupted: 1 of 2 policy runs finished")


def test_sweep_writes_the_finished_rows_marked_partial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import slosched.planning.sweep as sweep_module

    real, calls = sweep_module.capacity_task, []

    def third_is_interrupted(task: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:  # one seed per row: the first two rows finished
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(sweep_module, "capacity_task", third_is_interrupted)
    path, out = _scenario(tmp_path, SMALL, 40), tmp_path / "out"
    policies = "least-tokens+chunked-fcfs,round-robin+fcfs,least-loaded+fcfs"
    argv = ["sweep", str(path), "--quick", "--seeds", "1", "--jobs", "40", "--workers", "1", "--policies", policies]
    assert run([*argv, "--out", str(out), "--json"]) == 130
    captured = capsys.readouterr()
    document = json.loads(captured.out.strip().splitlines()[-1])
    assert document["partial"] is True and len(document["rows"]) == 2
    assert json.loads((out / "sweep.json").read_text())["partial"] is True
    assert captured.err.strip().splitlines()[-1].startswith("error: interrupted: 2 rows finished")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--ray", f"127.0.0.1:{_closed_port()}"], "--ray: cannot reach a Ray cluster at"),
        (["--ray", "not an address"], "--ray: expected HOST:PORT"),
        (["--out", "FILE"], "--out: "),
        (["--out", "FILE/sub"], "--out: "),
    ],
)
def test_bad_outputs_and_cluster_addresses_fail_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    path = _scenario(tmp_path, SMALL, 40)
    (tmp_path / "FILE").write_text("x")
    args = [arg.replace("FILE", str(tmp_path / "FILE")) for arg in args]
    started = time.monotonic()
    assert run(["sweep", str(path), "--quick", *args]) == 2
    assert time.monotonic() - started < 15
    errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"error: {expected}"), errors


def test_an_interrupted_bench_is_one_error_line_and_130(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import slosched.bench.registry as registry
    from slosched.bench.base import Benchmark

    def interrupted(quick: bool) -> dict[str, Any]:
        raise KeyboardInterrupt

    monkeypatch.setattr(registry, "get_benchmark", lambda name: Benchmark(name, "", interrupted))
    assert run(["bench", "sim-speed", "--quick", "--json"]) == 130
    captured = capsys.readouterr()
    assert captured.out == ""  # no row finished: nothing to show
    assert captured.err.strip().splitlines() == [
        "error: interrupted: bench sim-speed stopped with 0 rows finished; no report written"
    ]
