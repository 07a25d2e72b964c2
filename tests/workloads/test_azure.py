"""``workloads.azure``: Azure 2023 lengths (empirical rows or fitted lognormals), clipping, SLOs, ids."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.core.job import JobKind, JobSpec, validate_job
from slosched.workloads.azure import azure
from slosched.workloads.bundled import azure_trace

ARRIVALS = np.arange(400, dtype=np.float64) * 0.25


def make_jobs(name: str = "azure-conv", seed: int = 3, count: int = 400, **params: Any) -> list[JobSpec]:
    return azure(name, params, ARRIVALS[:count], np.random.default_rng(seed))


@pytest.mark.parametrize("name", ["azure-conv", "azure-code"])
def test_empirical_rows_come_from_the_trace_whole(name: str) -> None:
    jobs = make_jobs(name)
    trace = azure_trace(name)
    rows = set(zip(trace.input_tokens.tolist(), trace.output_tokens.tolist(), strict=True))
    assert [job.id for job in jobs[:2]] == [f"{name}-0", f"{name}-1"]
    for job, arrival in zip(jobs, ARRIVALS.tolist(), strict=True):
        validate_job(job)
        assert job.kind is JobKind.SINGLE and job.arrival_s == arrival and job.template == name
        (call,) = job.stages[0].calls
        assert call.max_output_tokens == 2048 and 1 <= call.output_tokens <= 2048
        # Every (prompt, output) pair is one of the trace's rows when no clip applies to it.
        if call.input_tokens < 8000 and call.output_tokens < 2048:
            assert (call.input_tokens, call.output_tokens) in rows


def test_clipping_and_max_tokens() -> None:
    jobs = make_jobs(max_input_tokens=300, max_output_tokens=200, max_tokens=50, slo_s=7.5, id_prefix="x")
    calls = [job.stages[0].calls[0] for job in jobs]
    assert max(call.input_tokens for call in calls) == 300
    assert max(call.output_tokens for call in calls) == 50  # the engine stops at max_tokens
    assert all(call.max_output_tokens == 50 and call.output_tokens <= 50 for call in calls)
    assert {job.slo_s for job in jobs} == {7.5}
    assert jobs[-1].id == "x-399"


def test_lognormal_lengths_differ_from_the_empirical_ones_but_are_deterministic() -> None:
    lognormal = make_jobs(lengths="lognormal")
    assert lognormal == make_jobs(lengths="lognormal")
    assert lognormal != make_jobs()
    trace = azure_trace("azure-conv")
    prompts = [job.stages[0].calls[0].input_tokens for job in lognormal]
    # The fitted law has the trace's scale: medians within a factor of two.
    assert 0.5 < np.median(prompts) / np.median(trace.input_tokens) < 2.0


def test_no_arrivals_no_jobs() -> None:
    assert make_jobs(count=0) == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"lengths": "uniform"}, "azure-conv.lengths"),
        ({"max_tokens": 0}, "azure-conv.max_tokens"),
        ({"slo_s": -1}, "azure-conv.slo_s"),
        ({"max_token": 5}, "azure-conv params"),
    ],
)
def test_bad_parameters_are_named(params: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as error:
        make_jobs(**params)
    assert error.value.field == field
