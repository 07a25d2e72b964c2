"""`slosched compare --loads`: the same jobs at several offered rates, plotted in report.html."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from slosched.cli.main import run
from tests.scenario.test_config import BASE


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({**BASE, "workload": {**BASE["workload"], "num_jobs": 60}}))
    return path


def test_loads_add_the_load_plot_and_leave_the_base_run_alone(
    scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["compare", str(scenario), "--json"]) == 0
    base = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    report = tmp_path / "report"
    assert run(["compare", str(scenario), "--json", "--loads", "0.5,2,1", "--report", str(report)]) == 0
    with_loads = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert with_loads == base  # the headline is the scenario's own rate, whatever else ran
    page = (report / "report.html").read_text()
    assert "Not shown: single offered load" not in page and "vs load" in page


@pytest.mark.parametrize("loads", ["0", "-1,2", "x", "inf"])
def test_bad_loads_are_one_error_line(scenario: Path, capsys: pytest.CaptureFixture[str], loads: str) -> None:
    assert run(["compare", str(scenario), "--loads", loads]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: --loads"), errors
