"""`slosched sweep` from the command line: the JSON headline, the files, and one error line on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.planning.test_sweep import SMALL

from slosched.evaluation.judgement import JUDGEMENT_NAME


def _sweep(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "slosched.cli", "sweep", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.fixture()
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    return path


def test_json_headline_and_files(scenario_file: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    args = ["--quick", "--seeds", "1", "--jobs", "40", "--workers", "1", "--out", out, "--json"]
    result = _sweep(str(scenario_file), *args, "--policies", "least-tokens+chunked-fcfs", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(document["capacity_rps"]) == {"least-tokens+chunked-fcfs"}
    assert document["capacity_rps"]["least-tokens+chunked-fcfs"] > 0
    for name in ("sweep.json", "sweep.csv", "sweep.html"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    assert "<img" in (tmp_path / "out" / "sweep.html").read_text()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--mix", "a100"], "--mix"),
        (["--mix", "h100:2"], "--mix"),
        (["--size", "a100"], "--size"),
        (["--rate", "3"], "--size"),
        (["--seeds", "0"], "--seeds"),
        (["--target", "1.5"], "--target"),
        (["--policies", "nope+fcfs"], "nope"),
        (["--set", "nonsense.x=1"], "nonsense"),
    ],
)
def test_bad_input_is_one_error_line(scenario_file: Path, tmp_path: Path, args: list[str], field: str) -> None:
    result = _sweep(str(scenario_file), "--quick", *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and field in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_out_that_is_a_file_fails_before_running(scenario_file: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = _sweep(str(scenario_file), "--quick", "--out", str(blocker), cwd=tmp_path)
    assert result.returncode == 2 and "--out" in result.stderr


def test_a_workload_too_small_for_its_runs_is_a_warning(tmp_path: Path) -> None:
    """A 5-job trace cannot give runs long enough for a backlog to show: `sweep --size` still answers, but
    says so on stderr (`warning:`) and in the JSON's `warnings`."""
    from slosched.planning.workload import ScenarioJobs
    from slosched.scenario.config import parse_scenario
    from slosched.workloads.trace_io import save_jobs

    trace = tmp_path / "five.jsonl"
    save_jobs(trace, ScenarioJobs(parse_scenario(SMALL))(5, 0))
    data = {**SMALL, "workload": {"trace": str(trace)}}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    args = ["--quick", "--seeds", "1", "--workers", "1", "--size", "a100", "--rate", "1", "--json"]
    result = _sweep(str(path), *args, "--policies", "least-tokens+chunked-fcfs", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings and "holds 5 jobs" in warnings[0]
    document = json.loads(result.stdout.strip().splitlines()[-1])
    assert document["warnings"] and "holds 5 jobs" in document["warnings"][0]
    assert document["judgement"] == JUDGEMENT_NAME
