"""The comparison on recorded data: a case of the full fidelity run (real vLLM records, its simulation) and
the profile measured in that run, kept in tests/fidelity/data/ (copied from docs/results/fidelity/)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from slosched.bench.fidelity.runs import simulate_trace
from slosched.core.request import Outcome
from slosched.fidelity.compare import MEAN_METRICS, compare_runs, summarize_cases
from slosched.fidelity.records_io import load_run

DATA = Path(__file__).parent / "data"
CASE = DATA / "workflow-light.json"


def _signature(result):  # type: ignore[no-untyped-def]
    return sorted(
        (r.job_id, r.stage, r.prompt_tokens, r.output_tokens, r.first_token_s, r.finish_s) for r in result.requests
    )


def test_the_recorded_trace_resimulates_to_the_recorded_simulation() -> None:
    jobs, real, sim = load_run(CASE)
    assert all(r.outcome is Outcome.COMPLETED for r in real.requests)
    assert len(real.requests) == len(sim.requests) == sum(job.num_calls for job in jobs)
    again = simulate_trace(jobs, DATA / "profile.json")
    assert _signature(again) == _signature(sim)  # deterministic: the recorded figures can be re-derived


def test_the_comparison_of_the_recorded_case() -> None:
    _, real, sim = load_run(CASE)
    cases = compare_runs("workflow", "light", real, sim, job_metrics=True)
    metrics = {case.metric for case in cases}
    assert set(MEAN_METRICS) <= metrics and "throughput_tokens_per_s" in metrics
    for case in cases:
        assert case.real > 0 and case.sim > 0
        assert case.error_pct == pytest.approx(100.0 * (case.sim - case.real) / case.real)
    # Every call made exactly the recorded number of tokens in both runs.
    assert sorted(r.output_tokens for r in real.requests) == sorted(r.output_tokens for r in sim.requests)
    summary = summarize_cases(cases)
    assert math.isfinite(summary["mean_abs_error_pct"]) and summary["all_abs_error_pct"] >= 0
