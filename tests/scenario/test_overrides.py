"""``--set PATH=VALUE`` overrides: YAML values, list indices, created blocks, and errors naming the path."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.scenario.config import load_scenario
from slosched.scenario.overrides import apply_overrides, parse_override
from tests.scenario.test_config import BASE


@pytest.mark.parametrize(
    ("text", "keys", "value"),
    [
        ("workload.num_jobs=200", ["workload", "num_jobs"], 200),
        ("policies=[least-tokens+fcfs, slosched]", ["policies"], ["least-tokens+fcfs", "slosched"]),
        ("slo.scale=2.5", ["slo", "scale"], 2.5),
        ("simulator.fast_forward=false", ["simulator", "fast_forward"], False),
        ("slo.seconds=null", ["slo", "seconds"], None),
        ("name=a=b", ["name"], "a=b"),
        ("description=", ["description"], ""),
    ],
)
def test_values_are_read_as_yaml(text: str, keys: list[str], value: object) -> None:
    assert parse_override(text) == (keys, value)


def test_overrides_apply_in_order_and_leave_the_input_alone() -> None:
    original = copy.deepcopy(BASE)
    data = apply_overrides(BASE, ["workload.num_jobs=5", "cluster.instances.0.gpu=A6000", "workload.num_jobs=7"])
    assert data["workload"]["num_jobs"] == 7
    assert data["cluster"]["instances"][0]["gpu"] == "A6000"
    assert original == BASE


def test_missing_blocks_are_created() -> None:
    data = apply_overrides(BASE, ["policy_params.engine.chunked-fcfs.token_budget=512"])
    assert data["policy_params"] == {"engine": {"chunked-fcfs": {"token_budget": 512}}}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("slo.scale.x=1", "'slo.scale' holds 5, not a mapping or list"),
        ("cluster.instances.3.gpu=A100", "index 3 out of range for a list of 1"),
        ("cluster.instances.first.gpu=A100", "a list needs an index"),
        ("workload.num_jobs", "expected PATH=VALUE"),
        ("=3", "expected PATH=VALUE"),
        ("workload..num_jobs=3", "empty key"),
        ("policies=[a, b", "not a YAML scalar or list"),
    ],
)
def test_bad_overrides_name_the_path(text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match="--set") as error:
        apply_overrides(BASE, [text])
    assert expected in str(error.value)


def test_load_scenario_applies_overrides_before_validation(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(BASE))
    scenario = load_scenario(path, ["workload.num_jobs=3", "policies=[least-tokens+fcfs]"])
    assert scenario.workload.num_jobs == 3 and scenario.policies == ["least-tokens+fcfs"]
    with pytest.raises(ConfigError, match=r"workload\.num_jobs"):
        load_scenario(path, ["workload.num_jobs=0"])


@given(st.one_of(st.integers(), st.booleans(), st.text(alphabet="abcxyz-_", min_size=1, max_size=12)))
def test_a_set_value_reads_back(value: int | bool | str) -> None:
    text = value if isinstance(value, str) else yaml.safe_dump(value).removesuffix("\n...\n").strip()
    data = apply_overrides(BASE, [f"workload.params.key={text}"])
    assert data["workload"]["params"]["key"] == yaml.safe_load(str(text))
