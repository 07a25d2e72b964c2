"""The synthetic ``relquery`` generator: paper facts, prefix structure, determinism, trace round trip."""

from __future__ import annotations

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.core.job import JobKind, validate_job
from slosched.workloads import generate_jobs, make_workload
from slosched.workloads.bundled import workload_section
from slosched.workloads.trace_io import job_from_line, job_to_line


def test_relqueries_follow_the_dataset_and_query_type_facts() -> None:
    jobs = make_workload("relquery", {"process": "poisson", "rate": 1.0}, 200, {"dataset": "beer"}, seed=4)
    limits = workload_section("relquery", "query_types_output_limit")
    facts = workload_section("relquery", "datasets_avg_tokens")["beer"]
    rows = []
    for job in jobs:
        validate_job(job)
        assert job.kind is JobKind.RELQUERY and len(job.stages) == 1
        calls = job.stages[0].calls
        assert 1 <= len(calls) <= 100
        dataset, query_type = job.template.split("/")
        assert dataset == "beer" and query_type in limits
        assert {call.prefix_key for call in calls} == {f"{job.id}/template"}
        assert all(call.output_tokens <= call.max_output_tokens == limits[query_type] for call in calls)
        rows.extend(call.input_tokens for call in calls)
    assert np.mean(rows) == pytest.approx(facts["input"], rel=0.1)
    assert np.mean([len(job.stages[0].calls) for job in jobs]) == pytest.approx(50.5, rel=0.15)


def test_deterministic_and_round_trips_through_the_trace_format() -> None:
    arrivals = np.array([0.0, 1.0, 1.5])
    params = {"dataset": "mixed", "query_type": "rate", "max_rows": 5}
    first = generate_jobs("relquery", params, arrivals, np.random.default_rng(3))
    again = generate_jobs("relquery", params, arrivals, np.random.default_rng(3))
    assert first == again and [job.arrival_s for job in first] == [0.0, 1.0, 1.5]
    assert all(job_from_line(job_to_line(job)) == job for job in first)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"dataset": "imdb"}, "dataset"),
        ({"max_rows": 0}, "max_rows"),
        ({"template_share": 1.0}, "template_share"),
        ({"rows": 3}, "params"),
    ],
)
def test_bad_params_are_named(params: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        generate_jobs("relquery", params, np.array([0.0]), np.random.default_rng(0))
