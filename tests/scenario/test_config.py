"""Scenario files: valid ones load; bad ones fail naming the field and the allowed values."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from slosched.core.errors import ConfigError
from slosched.scenario.config import load_scenario, parse_scenario

BASE: dict[str, Any] = {
    "name": "t",
    "seed": 3,
    "cluster": {"instances": [{"name": "a", "gpu": "A100-80G", "model": "Llama-3-8B", "count": 2}]},
    "workload": {"generator": "azure-conv", "arrival": {"process": "poisson", "rate": 2.0}, "num_jobs": 20},
    "slo": {"scale": 5},
    "policies": ["round-robin+fcfs", "least-loaded+chunked-fcfs"],
}


def _with(path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    node = data
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if key.isdigit() else node[key]
    node[keys[-1]] = value
    return data


def test_valid_scenario_builds_specs_jobs_and_options() -> None:
    scenario = parse_scenario(BASE)
    assert [spec.name for spec in scenario.cluster.specs()] == ["a-0", "a-1"]
    jobs = scenario.jobs()
    assert len(jobs) == 20 and jobs == scenario.jobs()  # deterministic by seed
    assert scenario.options().slo_scale == 5


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("cluster.instances.0.gpu", "TPU", "known names"),
        ("cluster.instances.0.model", "GPT-9", "Llama-3-8B"),
        ("cluster.instances.0.stack", "tensorrt", "splitwise"),
        ("cluster.instances.0.count", 0, "count"),
        ("workload.arrival", {"process": "poisson", "rate": -3}, "rate"),
        ("workload.arrival", {"process": "sometimes"}, "poisson"),
        ("slo", {"scale": 0}, "scale"),
        ("slo", {"seconds": -1}, "seconds"),
        ("policies", ["round-robin+fifo"], "chunked-fcfs"),
        ("policies", ["nearest+fcfs"], "least-tokens"),
        ("job_policy", "magic", "deadline"),
        ("simulator", {"noise": 0.1}, "noise"),
        ("surprise", 1, "surprise"),
    ],
)
def test_bad_values_name_the_field_and_allowed_values(path: str, value: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_scenario(_with(path, value))
    assert expected in str(error.value)


def test_workload_needs_exactly_one_source() -> None:
    with pytest.raises(ConfigError, match="exactly one of 'generator' or 'trace'"):
        parse_scenario(_with("workload", {"num_jobs": 3}))


def test_unknown_generator_is_named_when_jobs_are_built() -> None:
    scenario = parse_scenario(_with("workload.generator", "tweets"))
    with pytest.raises(ConfigError, match="tweets"):
        scenario.jobs()


def test_load_scenario_reports_missing_files_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_scenario(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_scenario(bad)


def test_examples_load() -> None:
    examples = sorted(Path(__file__).resolve().parents[2].joinpath("examples").glob("*.yaml"))
    assert examples, "examples/ should hold scenario files"
    for path in examples:
        load_scenario(path)


def test_sample_interval_is_a_scenario_key() -> None:
    assert parse_scenario(BASE).options().sample_interval_s is None  # picked from the arrival span
    assert parse_scenario(_with("simulator", {"sample_interval_s": 0.5})).options().sample_interval_s == 0.5
    with pytest.raises(ConfigError, match="sample_interval_s"):
        parse_scenario(_with("simulator", {"sample_interval_s": -1}))
