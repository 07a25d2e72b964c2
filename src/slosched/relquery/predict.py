"""Predict a planned relQuery's latency on a scenario's cluster (simulated, the relQuery alone).

The relQuery arrives at time 0 on an idle cluster; each policy pair of the scenario (or the one given)
serves it. Output lengths are the plan's assumption (``output_tokens`` per row, default the limit), so
the prediction is an upper bound when rows stop early.
"""

from __future__ import annotations

from dataclasses import dataclass

from slosched.core.request import Outcome
from slosched.metrics.breakdown import job_breakdown
from slosched.relquery.plan import RelQueryPlan
from slosched.scenario.config import Scenario
from slosched.sim.runner import PolicyPair, simulate


@dataclass(frozen=True, slots=True)
class LatencyPrediction:
    policy: str
    latency_s: float
    waiting_s: float
    core_s: float
    tail_s: float
    prefix_hit_rate: float


def predict_latency(
    plan: RelQueryPlan, scenario: Scenario, pairs: list[PolicyPair] | None = None, output_tokens: int | None = None
) -> list[LatencyPrediction]:
    """One prediction per policy pair; a relQuery the cluster cannot finish raises ``ConfigError``."""
    from slosched.core.errors import ConfigError

    job = plan.to_job("relquery", 0.0, output_tokens)
    predictions = []
    for pair in pairs or scenario.policy_pairs():
        result = simulate(
            scenario.cluster.specs(),
            [job],
            pair,
            scenario.seed,
            scenario.options(),
            scenario.params(),
            scenario.job_policy,
        )
        record = result.jobs[0]
        parts = job_breakdown(record)
        if record.outcome is not Outcome.COMPLETED or parts is None:
            raise ConfigError("relquery", f"the cluster cannot run it under {pair.name}: {record.reason}")
        queried = sum(stats.prefix_query_tokens for stats in result.instances)
        hits = sum(stats.prefix_hit_tokens for stats in result.instances)
        predictions.append(
            LatencyPrediction(
                pair.name,
                record.latency_s,
                parts.waiting_s,
                parts.core_s,
                parts.tail_s,
                hits / queried if queried else 0.0,
            )
        )
    return predictions
