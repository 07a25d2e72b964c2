"""``simulator.output_predictor``: which output-length belief the policies share, from the scenario to the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.scenario.config import load_scenario
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, build_sim

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "demo.yaml"


def test_the_scenario_key_reaches_the_policies_predictor() -> None:
    scenario = load_scenario(EXAMPLE, ["simulator.output_predictor=bucket"])
    options = scenario.options()
    assert options.output_predictor == "bucket"
    assert load_scenario(EXAMPLE).options().output_predictor == "mean"  # the default: unchanged runs
    sim = build_sim(scenario.cluster.specs(), PolicyPair.parse("least-tokens+chunked-fcfs"), 0, options)
    predictor = sim.output_predictor
    assert isinstance(predictor, HistoryOutputPredictor) and predictor.mode == "bucket"


def test_an_unknown_predictor_is_refused_naming_the_field_and_the_values() -> None:
    with pytest.raises(ConfigError, match=r"simulator\.output_predictor.*'median'.*\['mean', 'bucket'\]"):
        SimOptions(output_predictor="median")
    with pytest.raises(ConfigError, match="output_predictor"):
        load_scenario(EXAMPLE, ["simulator.output_predictor=median"])
