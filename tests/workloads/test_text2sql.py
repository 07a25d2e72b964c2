"""CHESS Text-to-SQL workflow generator: call order, published statistics, hard variant, bad input."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.core.job import JobKind, validate_job
from slosched.workloads.generators import make_workload
from slosched.workloads.text2sql import GEN_SECOND_CANDIDATE_SHORTER
from slosched.workloads.trace_io import job_from_line, job_to_line

POISSON = {"process": "poisson", "rate": 1.0}


def _kind(stage: str) -> str:
    return stage.rstrip("0123456789")


def test_call_order_and_shapes() -> None:
    jobs = make_workload("text2sql-chess", POISSON, 400, seed=3)
    for job in jobs:
        validate_job(job)
        assert job.kind is JobKind.WORKFLOW and job.template == "text2sql-chess"
        names = [stage.name for stage in job.stages]
        kinds = [_kind(name) for name in names]
        assert names[0] == "IR1" and names[-1] == "UT3"
        assert kinds.count("IR") == (4 if "KW" in names else 5)
        gen = job.stages[names.index("GEN")]
        assert len(gen.calls) == 2
        assert gen.calls[1].input_tokens == gen.calls[0].input_tokens - GEN_SECOND_CANDIDATE_SHORTER
        revise = [name for name in names if name.startswith("REVISE")]
        assert revise == [f"REVISE{r + 1}" for r in range(len(revise))] and len(revise) <= 10
        assert names.index("GEN") < names.index("UT1") < names.index("UT2")
        assert 10 <= job.num_calls <= 11 + 10 + 11


def test_statistics_match_the_published_traces() -> None:
    jobs = make_workload("text2sql-chess", POISSON, 3000, seed=1)
    calls = np.array([job.num_calls for job in jobs])
    assert 15.5 < calls.mean() < 17.5  # published mean 16.5, p50 16
    assert np.median(calls) == 16
    tokens = np.array([sum(c.input_tokens + c.output_tokens for s in j.stages for c in s.calls) for j in jobs])
    assert 28000 < np.median(tokens) < 34000  # published p50 31,044
    rounds = Counter(sum(s.name.startswith("REVISE") for s in job.stages) for job in jobs)
    assert abs(rounds[0] / len(jobs) - 0.664) < 0.03


def test_hard_variant_draws_revise_rounds_uniformly() -> None:
    jobs = make_workload("text2sql-chess-hard", POISSON, 2200, seed=2)
    rounds = Counter(sum(s.name.startswith("REVISE") for s in job.stages) for job in jobs)
    assert set(rounds) == set(range(11))
    assert all(abs(count / len(jobs) - 1 / 11) < 0.03 for count in rounds.values())


def test_lengths_are_clipped_at_the_observed_maximum() -> None:
    jobs = make_workload("text2sql-chess", POISSON, 500, seed=4)
    gen_inputs = [s.calls[0].input_tokens for j in jobs for s in j.stages if s.name == "GEN"]
    assert max(gen_inputs) <= 14131
    revise_out = [c.output_tokens for j in jobs for s in j.stages if s.name.startswith("REVISE") for c in s.calls]
    assert max(revise_out) <= 1078


def test_deterministic_and_trace_roundtrip() -> None:
    first = make_workload("text2sql-chess", POISSON, 50, {"tool_s": 0.5}, seed=9)
    assert first == make_workload("text2sql-chess", POISSON, 50, {"tool_s": 0.5}, seed=9)
    assert all(job_from_line(job_to_line(job)) == job for job in first)
    assert any(stage.tool_duration_s == 0.5 for stage in first[0].stages)


@pytest.mark.parametrize(
    ("params", "field"),
    [({"hard_fraction": 1.5}, "hard_fraction"), ({"shared_prefix": -0.1}, "shared_prefix"), ({"bogus": 1}, "bogus")],
)
def test_bad_params_are_rejected(params: dict[str, float], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        make_workload("text2sql-chess", POISSON, 5, params, seed=0)
