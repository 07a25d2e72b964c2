"""Every CLI failure is one ``error:`` line per problem and exit code 2, never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from slosched.cli.main import run
from tests.scenario.test_config import BASE


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(BASE))
    return path


def _dead_url() -> str:
    """A local port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _fails(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str, lines: int = 1) -> list[str]:
    code = run(argv)
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2, captured
    assert "Traceback" not in captured.out + captured.err
    assert len(errors) == lines and all(line.startswith("error: ") for line in errors), errors
    assert expected in captured.err, errors
    return errors


def test_missing_and_directory_scenarios(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _fails(capsys, ["simulate", str(tmp_path / "nope.yaml")], "file not found")
    _fails(capsys, ["compare", str(tmp_path)], "is a directory")
    _fails(capsys, ["trace", str(tmp_path), "--out", str(tmp_path / "t.jsonl")], "is a directory")
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: [unclosed")
    _fails(capsys, ["simulate", str(bad)], "not valid YAML")


def test_missing_trace_and_output_folders(capsys: pytest.CaptureFixture[str], scenario: Path, tmp_path: Path) -> None:
    _fails(capsys, ["simulate", str(scenario), "--trace", str(tmp_path / "no.jsonl")], "--trace: file not found")
    _fails(capsys, ["compare", str(scenario), "--trace", str(tmp_path)], "--trace")
    _fails(capsys, ["trace", str(scenario), "--out", str(tmp_path / "no" / "t.jsonl")], "does not exist")
    _fails(capsys, ["trace", str(scenario), "--out", str(tmp_path)], "is a directory")
    _fails(capsys, ["schema", "--out", str(tmp_path / "no" / "s.json")], "does not exist")


def test_unwritable_report_fails_before_simulating(
    capsys: pytest.CaptureFixture[str], scenario: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import slosched.experiment

    def no_simulation(*args: object, **kwargs: object) -> None:
        raise AssertionError("simulated before checking --report")

    monkeypatch.setattr(slosched.experiment, "compare_policies", no_simulation)
    _fails(capsys, ["simulate", str(scenario), "--report", str(scenario / "report")], "--report")
    _fails(capsys, ["compare", str(scenario), "--report", str(scenario)], "--report: ")
    _fails(capsys, ["demo", "--report", str(scenario)], "is a file, not a folder")


def test_profile_against_a_dead_url(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = _dead_url()
    _fails(capsys, ["profile", url, "--out", str(tmp_path / "p.json")], f"cannot reach {url}/v1/models")
    _fails(capsys, ["profile", "localhost:8000", "--out", str(tmp_path / "p.json")], "expected http(s)://")
    _fails(capsys, ["profile", url, "--out", str(tmp_path / "no" / "p.json")], "does not exist")


def test_every_scenario_problem_gets_its_line(capsys: pytest.CaptureFixture[str], scenario: Path) -> None:
    argv = ["compare", str(scenario), "--set", "policies=[nearst+fcfs, round-robin+fcs]", "--set", "job_policy=x"]
    errors = _fails(capsys, argv, "did you mean 'fcfs'?", lines=3)
    assert [line.split(":")[1].strip() for line in errors] == ["policies.0", "policies.1", "job_policy"]
    params = "policy_params={engine: {chunked-fcs: {token_budget: 5}}}"
    _fails(capsys, ["simulate", str(scenario), "--set", params], "policy_params.engine.chunked-fcs")


def test_bad_overrides_and_usage(capsys: pytest.CaptureFixture[str], scenario: Path) -> None:
    _fails(capsys, ["simulate", str(scenario), "--set", "slo.scale.x=1"], "--set slo.scale.x=1")
    _fails(capsys, ["demo", "--set", "workload.num_jobs"], "expected PATH=VALUE")
    _fails(capsys, ["simulate", str(scenario), "--bogus"], "No such option")
    _fails(capsys, ["simulate"], "Missing argument")
    _fails(capsys, ["simulate", str(scenario), "--policy", "x+[bold]y"], "unknown name 'x'")


def test_the_installed_entry_point_prints_one_line(scenario: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "slosched.cli", "simulate", str(scenario), "--trace", "/nonexistent/t.jsonl"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: --trace: file not found: /nonexistent/t.jsonl"
    ]
