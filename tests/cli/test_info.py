"""``slosched policies [--json]``, ``slosched schema`` (and its committed copy) and ``--version``."""

from __future__ import annotations

import dataclasses
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
    sections = {"routers", "engine_presets", "orderings", "admissions", "batchings", "job_policies", "stacks"}
    assert set(payload) == sections | {"filters", "scorers", "pickers"}
    jobs = {entry["name"]: entry for entry in payload["job_policies"]}
    assert jobs["deadline"]["params"] == []
    assert jobs["critical-path"]["aliases"] == ["slosched"]
    factor, backlog, stages, bands, pace, target = jobs["critical-path"]["params"]
    assert backlog["name"] == "backlog" and backlog["default"] is True
    assert stages["name"] == "backlog_stages" and stages["default"] == "arrival"
    assert bands["name"] == "tenant_bands" and bands["default"] is False
    assert pace["name"] == "pace_factor" and pace["type"] == "float | None" and pace["default"] == 0.9
    assert target["name"] == "admission_target" and target["type"] == "float | None" and target["default"] == 0.2
    assert factor["name"] == "triage_factor" and factor["type"] == "float" and factor["default"] == 1.0
    assert factor["doc"]
    chunked = next(e for e in payload["batchings"] if e["name"] == "chunked")
    budget = chunked["params"][0]
    assert (budget["name"], budget["type"], budget["default"]) == ("token_budget", "int | None", None)
    assert [entry["name"] for entry in payload["stacks"]] == ["slosched"]
    stack_keys = {param["name"] for param in payload["stacks"][0]["params"]}
    assert {"balance_rel", "tpot_residents", "token_budget", "triage_factor", "relegated_alone"} <= stack_keys


def test_every_registered_policy_declares_documented_defaults() -> None:
    """Every router, engine part, preset, job policy and pipeline stage has a params dataclass whose every
    field has a default and a doc; every alias names a registered policy."""
    from slosched.policies.catalog import pipeline_registries, registries

    for section, registry in {**registries(), **pipeline_registries()}.items():
        for alias, name in registry.aliases.items():
            assert name in registry.registered(), f"{section}: alias {alias!r} -> unregistered {name!r}"
        for name in registry.registered():
            params = registry.params_of(name)
            assert dataclasses.is_dataclass(params), f"{section} {name}"
            for field in dataclasses.fields(params):
                where = f"{section} {name}.{field.name}"
                assert field.default is not dataclasses.MISSING, f"{where}: no default"
                assert field.metadata.get("doc"), f"{where}: no doc"


def test_policies_text_shows_job_policies_aliases_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["policies"]) == 0
    text = capsys.readouterr().out
    assert "job policies" in text and "stage-budget" in text and "stacks" in text
    assert "token_budget: int | None = null" in text and "triage_factor: float = 1.0" in text
    assert "critical-path  (alias: slosched)" in text and "pipeline scorers" in text


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"slosched {__version__}"


def test_policies_lists_the_pipeline_stages_with_their_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23 item 4.6: filters, scorers and pickers of the ``pipeline`` router, in --json and in text."""
    from slosched.policies.cluster.pipeline import FILTERS, PICKERS, SCORERS

    assert run(["policies", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for section, registry in (("filters", FILTERS), ("scorers", SCORERS), ("pickers", PICKERS)):
        assert [entry["name"] for entry in payload[section]] == list(registry.registered())
    affinity = next(entry for entry in payload["filters"] if entry["name"] == "cache-affinity")
    assert {param["name"] for param in affinity["params"]} >= {"cache_threshold"}
    assert run(["policies"]) == 0
    text = capsys.readouterr().out
    assert "pipeline filters" in text and "pipeline pickers" in text and "cache_threshold: float = 0.3" in text
