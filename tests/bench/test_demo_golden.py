"""Golden result for the demo scenario (first 1,500 jobs, every demo policy): any change to the simulator,
the policies or the workload that moves a number shows up here. Regenerate deliberately with
``SLOSCHED_UPDATE_GOLDEN=1 pytest tests/bench/test_demo_golden.py`` and explain the change in the commit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from slosched.bench.demo import demo_scenario_path
from slosched.experiment import compare_policies
from slosched.metrics.summary import summarize
from slosched.scenario.config import load_scenario

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "demo_1500.json"


def test_demo_matches_golden() -> None:
    scenario = load_scenario(demo_scenario_path())
    jobs = scenario.jobs()[:1500]
    results = compare_policies(scenario, jobs=jobs)
    figures = {name: summarize(result).to_json_dict() for name, result in results.items()}
    if os.environ.get("SLOSCHED_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    expected = json.loads(GOLDEN.read_text())
    assert set(figures) == set(expected)
    for policy, values in expected.items():
        _assert_matches(figures[policy], values, (policy,))


def _assert_matches(actual: object, expected: object, where: tuple[str, ...]) -> None:
    """Floats, at any depth, match to 1e-9: numpy's SIMD summation (a mean over 1,500 requests) rounds the last bits
    differently on CPUs with other vector units, so an exact comparison fails on a CI machine of another kind."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), where
        for key, value in expected.items():
            _assert_matches(actual[key], value, (*where, key))
    elif isinstance(expected, float):
        assert actual == pytest.approx(expected, rel=1e-9), where
    else:
        assert actual == expected, where
