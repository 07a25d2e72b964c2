"""Scenario validation: every problem at once, fields as the file spells them, and a did-you-mean."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from slosched.policies.catalog import catalog, param_names
from slosched.scenario.config import load_scenario, parse_scenario
from slosched.scenario.validation import ScenarioError
from tests.scenario.test_config import BASE


def _problems(data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ScenarioError) as error:
        parse_scenario(data)
    problems = {problem.field: problem.message for problem in error.value.problems}
    assert str(error.value).count("\n") == len(problems) - 1  # one line per problem
    return problems


def test_all_problems_are_reported_at_once() -> None:
    data = copy.deepcopy(BASE)
    data["cluster"]["instances"][0]["gpuu"] = "A100"
    data["workload"]["arrival"] = {"process": "poison", "rate": 1}
    data["slo"] = {"scale": -1}
    data["policies"] = ["round-robin+fcfs", "nearst+fcfs", "least-tokens+chunked-fcs"]
    data["job_policy"] = "deadlin"
    data["policy_params"] = {"engine": {"chunked-fcs": {"token_budget": 5}}}
    problems = _problems(data)
    assert set(problems) == {
        "cluster.instances.0.gpuu",
        "workload.arrival.process",
        "slo.scale",
        "policies.1",
        "policies.2",
        "job_policy",
        "policy_params.engine.chunked-fcs",
    }
    assert "did you mean 'gpu'?" in problems["cluster.instances.0.gpuu"]
    assert "did you mean 'poisson'?" in problems["workload.arrival.process"]
    assert "did you mean 'chunked-fcfs'?" in problems["policies.2"]
    assert "did you mean 'deadline'?" in problems["job_policy"]
    assert "did you mean 'chunked-fcfs'?" in problems["policy_params.engine.chunked-fcs"]
    assert not any("Value error" in message for message in problems.values())


@pytest.mark.parametrize(
    ("arrival", "field", "expected"),
    [
        ({"process": "poisson", "ratee": 1}, "workload.arrival.ratee", "did you mean 'rate'?"),
        ({"process": "gamma", "rate": 1}, "workload.arrival.cv", "required for process 'gamma'"),
        ({"process": "poisson", "rate": 1, "cv": 2}, "workload.arrival.cv", "not a parameter of process"),
        ({"process": "poisson", "rate": -1}, "workload.arrival.rate", "greater than 0"),
    ],
)
def test_arrival_errors_use_the_scenario_key(arrival: dict[str, Any], field: str, expected: str) -> None:
    data = copy.deepcopy(BASE)
    data["workload"]["arrival"] = arrival
    problems = _problems(data)
    assert list(problems) == [field] and expected in problems[field]
    assert "arrivals" not in problems[field] and "Value error" not in problems[field]


@pytest.mark.parametrize(
    ("params", "field", "expected"),
    [
        ({"routers": {}}, "policy_params.routers", "did you mean 'router'?"),
        ({"router": {"prism": {"w_afinity": 1}}}, "policy_params.router.prism.w_afinity", "did you mean 'w_affinity'?"),
        ({"router": {"nearest": {}}}, "policy_params.router.nearest", "known names: cache-aware"),
        (
            {"engine": {"chunked-fcfs": {"token_budgte": 5}}},
            "policy_params.engine.chunked-fcfs.token_budgte",
            "its parameters: token_budget",
        ),
        (
            {"engine": {"urgency/always/chunkd": {}}},
            "policy_params.engine.urgency/always/chunkd.batching",
            "did you mean 'chunked'?",
        ),
        (
            {"engine": {"urgency/always/chunked": {"batchin": {}}}},
            "policy_params.engine.urgency/always/chunked.batchin",
            "did you mean 'batching'?",
        ),
        (
            {"engine": {"urgency/always/chunked": {"batching": {"token_budgt": 1}}}},
            "policy_params.engine.urgency/always/chunked.batching.token_budgt",
            "did you mean 'token_budget'?",
        ),
        ({"job": {"deadline": {"x": 1}}}, "policy_params.job.deadline.x", "it takes no parameters"),
        (
            {"stack": {"slosched": {"triage_factr": 1}}},
            "policy_params.stack.slosched.triage_factr",
            "did you mean 'triage_factor'?",
        ),
        ({"stack": {"sloshed": {}}}, "policy_params.stack.sloshed", "did you mean 'slosched'?"),
    ],
)
def test_policy_params_names_are_checked(params: dict[str, Any], field: str, expected: str) -> None:
    problems = _problems({**BASE, "policy_params": params})
    assert list(problems) == [field] and expected in problems[field], problems


def test_valid_policy_params_pass() -> None:
    params = {
        "router": {"prism": {"w_affinity": 1.0}},
        "engine": {"chunked-fcfs": {"token_budget": 512}, "urgency/always/chunked": {"batching": {"token_budget": 64}}},
        "job": {"slosched": {"triage_factor": 2.0}},
        "stack": {"slosched": {"triage_factor": 2.0, "token_budget": 512}},
    }
    assert parse_scenario({**BASE, "policy_params": params}).policy_params.engine["chunked-fcfs"] == {
        "token_budget": 512
    }


def test_every_builtin_policy_exposes_its_parameter_names() -> None:
    sections = catalog()
    assert set(sections) == {
        "routers",
        "engine_presets",
        "orderings",
        "admissions",
        "batchings",
        "job_policies",
        "stacks",
        "filters",
        "scorers",
        "pickers",
    }
    for section, entries in sections.items():
        assert entries, section
        for entry in entries:
            assert entry.params is not None, (section, entry.name)
    assert param_names("batchings", "chunked") == ("token_budget",)
    assert param_names("job_policies", "deadline") == ()


def test_a_scenario_file_names_an_unknown_generator_with_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    data = copy.deepcopy(BASE)
    data["workload"]["generator"] = "azure-cnv"
    data["job_policy"] = "nope"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError) as error:
        load_scenario(path)
    fields = [problem.field for problem in error.value.problems]
    assert fields == ["job_policy", "workload.generator"]
    assert "did you mean 'azure-conv'?" in error.value.problems[1].message
