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
        for key, value in values.items():
            actual = figures[policy][key]
            if isinstance(value, float):
                assert actual == pytest.approx(value, rel=1e-9), (policy, key)
            else:
                assert actual == value, (policy, key)
