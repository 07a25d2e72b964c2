"""Fidelity traces: shapes, determinism, prefix sharing, and the capacity estimate."""

from __future__ import annotations

import pytest

from slosched.core.errors import UnknownNameError
from slosched.core.job import JobKind, validate_job
from slosched.fidelity.traces import MAX_MODEL_LEN, TRACES, capacity_jobs_per_s, job_work_s, make_trace
from slosched.perf.profile_fit import MeasuredStepModel

MODEL = MeasuredStepModel(fixed_s=0.004, prefill_token_s=5e-5, prefill_pair_s=1e-9, decode_seq_s=2e-4, kv_token_s=1e-8)


@pytest.mark.parametrize("name", list(TRACES))
def test_traces_are_valid_deterministic_and_fit_the_tiny_model(name: str) -> None:
    jobs = make_trace(name, 30, 2.0, seed=3)
    assert jobs == make_trace(name, 30, 2.0, seed=3)
    assert jobs != make_trace(name, 30, 2.0, seed=4)
    arrivals = [job.arrival_s for job in jobs]
    assert arrivals[0] == 0.0 and arrivals == sorted(arrivals)
    assert 30 / 2.0 * 0.4 < arrivals[-1] < 30 / 2.0 * 2.5  # Poisson at 2 jobs/s
    for job in jobs:
        validate_job(job)
        for stage in job.stages:
            for call in stage.calls:
                assert call.input_tokens + call.output_tokens <= MAX_MODEL_LEN
                assert call.prefix_tokens <= call.input_tokens


def test_workflows_share_a_schema_prefix_and_relqueries_a_template() -> None:
    flows = make_trace("workflow", 10, 1.0, seed=0)
    keys = {call.prefix_key for job in flows for stage in job.stages for call in stage.calls}
    assert keys <= {"db0", "db1", "db2"} and all(job.kind is JobKind.WORKFLOW for job in flows)
    assert any(stage.tool_duration_s > 0 for stage in flows[0].stages)
    queries = make_trace("relquery", 5, 1.0, seed=0)
    for job in queries:
        (stage,) = job.stages
        assert {call.prefix_key for call in stage.calls} == {f"{job.id}/template"}


def test_capacity_is_the_inverse_of_the_mean_job_work() -> None:
    jobs = make_trace("chat", 50, 1.0, seed=1)
    capacity = capacity_jobs_per_s(jobs, MODEL)
    mean_work = sum(job_work_s(job, MODEL) for job in jobs) / len(jobs)
    assert capacity == pytest.approx(1 / mean_work)
    # Decoding alone is dearer per sequence than in a batch of 32: capacity grows with the batch.
    assert capacity_jobs_per_s(jobs, MODEL, batch=1) < capacity


def test_unknown_trace_names_the_allowed_ones() -> None:
    with pytest.raises(UnknownNameError, match="chat"):
        make_trace("nope", 1, 1.0, seed=0)
