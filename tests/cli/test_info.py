"""``slosched policies [--json]``, ``slosched schema`` (and its committed copy) and ``--version``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slosched import __version__
from slosched.cli.main import run

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "scenario.schema.json"


def test_committed_schema_matches_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["schema"]) == 0
    printed = capsys.readouterr().out
    assert printed == SCHEMA_FILE.read_text(), "regenerate: slosched schema --out docs/scenario.schema.json"


def test_schema_enumerates_registry_names(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run(["schema", "--out", str(tmp_path / "s.json")]) == 0
    schema = json.loads((tmp_path / "s.json").read_text())
    assert "deadline" in schema["properties"]["job_policy"]["enum"]
    assert "least-tokens+chunked-fcfs" in schema["properties"]["policies"]["items"]["anyOf"][0]["enum"]
    params = schema["$defs"]["PolicyParamsConfig"]["properties"]
    assert params["engine"]["properties"]["chunked-fcfs"]["properties"] == {"token_budget": {}}
    assert "triage_factor" in params["stack"]["properties"]["slosched"]["properties"]
    assert schema["$defs"]["WorkloadConfig"]["properties"]["arrival"] == {"$ref": "#/$defs/ArrivalSpec"}


def test_policies_json_lists_every_section_with_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["policies", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(payload) == {
        "routers", "engine_presets", "orderings", "admissions", "batchings", "job_policies", "stacks"
    }  # fmt: skip
    jobs = {entry["name"]: entry["params"] for entry in payload["job_policies"]}
    assert jobs["deadline"] == [] and jobs["slosched"] == [{"name": "triage_factor"}]
    assert {"name": "token_budget"} in next(e["params"] for e in payload["batchings"] if e["name"] == "chunked")
    assert [entry["name"] for entry in payload["stacks"]] == ["slosched"]


def test_policies_text_shows_job_policies_and_stacks(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["policies"]) == 0
    text = capsys.readouterr().out
    assert "job policies" in text and "stage-budget" in text and "stacks" in text and "token_budget" in text


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"slosched {__version__}"
