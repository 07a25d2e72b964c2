"""``relquery.predict``: a planned relQuery simulated alone on a scenario's cluster, one prediction per pair."""

from __future__ import annotations

import pytest

from slosched.core.errors import ConfigError
from slosched.relquery.plan import RelQueryPlan
from slosched.relquery.predict import predict_latency
from slosched.relquery.template import PromptTemplate
from slosched.scenario.config import Scenario, parse_scenario
from slosched.sim.runner import PolicyPair


def make_scenario(max_model_len: int = 4096) -> Scenario:
    return parse_scenario(
        {
            "seed": 1,
            "cluster": {
                "instances": [{"name": "a", "gpu": "A100-80G", "model": "Llama-3-8B", "max_model_len": max_model_len}]
            },
            "workload": {"generator": "azure-conv", "num_jobs": 1},
            "policies": ["round-robin+fcfs", "least-loaded+chunked-fcfs"],
            "simulator": {"noise_sigma": 0.0},
        }
    )


def make_plan(rows: int = 12, template_tokens: int = 256, row_tokens: int = 40) -> RelQueryPlan:
    return RelQueryPlan(
        "table", PromptTemplate.parse("x {a}"), 32, template_tokens, (row_tokens,) * rows, ("p",) * rows
    )


def test_one_prediction_per_scenario_pair_with_consistent_parts() -> None:
    predictions = predict_latency(make_plan(), make_scenario())
    assert [p.policy for p in predictions] == ["round-robin+fcfs", "least-loaded+chunked-fcfs"]
    for p in predictions:
        assert p.latency_s > 0
        assert min(p.waiting_s, p.core_s, p.tail_s) >= 0
        assert p.waiting_s + p.core_s + p.tail_s == pytest.approx(p.latency_s)
        # Rows after the first reuse the cached template blocks (256 tokens = 16 full blocks of 16).
        assert 0 < p.prefix_hit_rate < 1


def test_given_pairs_and_shorter_outputs() -> None:
    pair = PolicyPair.parse("round-robin+fcfs")
    longer = predict_latency(make_plan(), make_scenario(), [pair])
    shorter = predict_latency(make_plan(), make_scenario(), [pair], output_tokens=4)
    assert len(longer) == len(shorter) == 1
    assert shorter[0].latency_s < longer[0].latency_s


def test_deterministic() -> None:
    assert predict_latency(make_plan(), make_scenario()) == predict_latency(make_plan(), make_scenario())


def test_a_relquery_the_cluster_cannot_run_is_refused() -> None:
    with pytest.raises(ConfigError, match="cannot run it under round-robin"):
        predict_latency(make_plan(template_tokens=200, row_tokens=100), make_scenario(max_model_len=256))
