"""Workflow lines may repeat a step (CHESS runs unit_tester several times): unique stage identities
(``unit_tester#2``), the step name kept for predictors, dependencies resolved, and a simulation runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from slosched.cli.main import run
from slosched.core.errors import ConfigError
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec, step_name, unique_stage_names, validate_job
from slosched.sim.deadlines import stage_kind
from slosched.workloads.trace_io import job_from_line, load_jobs, save_jobs
from tests.scenario.test_config import BASE


def _stage(name: str, after: list[str] | None = None) -> dict[str, object]:
    stage: dict[str, object] = {"name": name, "calls": [{"input_tokens": 300, "output_tokens": 20}]}
    if after is not None:
        stage["after"] = after
    return stage


CHESS = {
    "id": "q1",
    "kind": "workflow",
    "arrival_s": 0.0,
    "template": "chess",
    "stages": [
        _stage("IR"),
        _stage("candidate_generator"),
        _stage("unit_tester"),
        _stage("revise"),
        _stage("unit_tester"),
        _stage("revise"),
        _stage("unit_tester"),
        _stage("evaluator", after=["unit_tester", "IR"]),
    ],
}


def test_repeated_steps_get_unique_identities() -> None:
    job = job_from_line(json.dumps(CHESS))
    names = [stage.name for stage in job.stages]
    assert names == [
        "IR",
        "candidate_generator",
        "unit_tester",
        "revise",
        "unit_tester#2",
        "revise#2",
        "unit_tester#3",
        "evaluator",
    ]
    assert [step_name(name) for name in names] == [name.split("#")[0] for name in names]
    deps = job.dependencies()
    assert deps["unit_tester#2"] == ("revise",) and deps["revise#2"] == ("unit_tester#2",)
    # An `after` naming a repeated step means its latest occurrence before the stage.
    assert deps["evaluator"] == ("unit_tester#3", "IR")
    assert [stage.name for stage in job.topological_stages()] == names


def test_after_resolves_to_the_latest_earlier_occurrence_or_the_first() -> None:
    stages = [_stage("a"), _stage("b", after=["a"]), _stage("a", after=["b"]), _stage("c", after=["a", "a#2"])]
    job = job_from_line(json.dumps({**CHESS, "stages": stages}))
    assert job.dependencies() == {"a": (), "b": ("a",), "a#2": ("b",), "c": ("a#2",)}


def test_round_trip_and_traces_without_repeats_are_unchanged(tmp_path: Path) -> None:
    job = job_from_line(json.dumps(CHESS))
    save_jobs(tmp_path / "t.jsonl", [job])
    assert load_jobs(tmp_path / "t.jsonl") == [job]
    plain = {**CHESS, "stages": [_stage("x"), _stage("y", after=["x"])]}
    assert [stage.name for stage in job_from_line(json.dumps(plain)).stages] == ["x", "y"]


def test_unique_stage_names_skips_taken_suffixes() -> None:
    assert unique_stage_names(["a", "a#2", "a", "b"]) == ["a", "a#2", "a#3", "b"]
    assert unique_stage_names(["a", "b"]) == ["a", "b"]


def test_step_names_for_predictors() -> None:
    assert step_name("unit_tester#2") == "unit_tester" and step_name("a#b") == "a#b" and step_name("#2") == "#2"
    assert stage_kind("unit_tester#3") == "unit_tester" and stage_kind("revise3") == "revise"


def test_a_spec_with_repeated_names_is_still_refused_with_a_hint() -> None:
    call = (CallSpec(10, 2),)
    job = JobSpec("j", JobKind.WORKFLOW, 0.0, (StageSpec("a", call), StageSpec("a", call)))
    with pytest.raises(ConfigError, match="step#2"):
        validate_job(job)


def test_a_trace_with_repeated_steps_simulates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "chess.jsonl"
    jobs = [{**CHESS, "id": f"q{i}", "arrival_s": float(i), "slo_s": 60.0} for i in range(3)]
    trace.write_text("\n".join(json.dumps(job) for job in jobs) + "\n")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({**BASE, "policies": ["least-loaded+chunked-fcfs"]}))
    assert run(["simulate", str(scenario), "--trace", str(trace), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["policies"]["least-loaded+chunked-fcfs"]
    assert summary["jobs"] == 3 and summary["rejected"] == 0
