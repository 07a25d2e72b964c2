"""`slosched tune`: the stack's knobs tuned on a scenario's traffic or a recorded trace; the block printed to
deploy, its candidates' scores in the JSON; bad input is one error line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from slosched.cli.main import run
from slosched.tuning.stack import KNOBS
from tests.scenario.test_config import BASE


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "scenario.yaml"
    block = {"stack": {"slosched": {"triage_factor": 0.5}}}
    path.write_text(yaml.safe_dump({**BASE, "workload": {**BASE["workload"], "num_jobs": 16}, "policy_params": block}))
    return path


def test_tune_prints_a_deployable_block_with_every_knob_and_keeps_the_scenarios_own(
    scenario: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["tune", str(scenario), "--json", "--rate", "3"]) == 0
    figures = json.loads(capsys.readouterr().out)
    block = figures["block"]
    assert block["triage_factor"] == 0.5  # the scenario's own key stays
    assert {name for name, _ in KNOBS} <= set(block)
    assert figures["rate"] == 3.0
    chosen = [c for c in figures["candidates"] if c["settings"] == figures["settings"]]
    assert len(chosen) == 1 and all(0 <= a <= 1 for a in chosen[0]["attainment"])
    assert run(["tune", str(scenario), "--rate", "3"]) == 0
    text = capsys.readouterr().out
    assert "(chosen)" in text and "slosched:" in text and "token_budget:" in text


def test_tune_reads_a_recorded_trace(scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "recent.jsonl"
    assert run(["trace", "dump", str(scenario), "--out", str(trace)]) == 0
    capsys.readouterr()
    assert run(["tune", str(scenario), "--trace", str(trace), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["block"]["token_budget"] in dict(KNOBS)["token_budget"]


@pytest.mark.parametrize(("args", "field"), [(["--rate", "0"], "--rate"), (["--trace", "missing.jsonl"], "--trace")])
def test_bad_input_is_one_error_line(
    scenario: Path, capsys: pytest.CaptureFixture[str], args: list[str], field: str
) -> None:
    assert run(["tune", str(scenario), *args]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"error: {field}"), errors
