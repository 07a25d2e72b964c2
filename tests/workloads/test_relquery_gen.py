"""The synthetic ``relquery`` generator: paper facts, prefix structure, determinism, trace round trip."""

from __future__ import annotations

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.core.job import JobKind, JobSpec, validate_job
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
        ({"template_share": "high"}, "template_share"),
        ({"rows": 3}, "params"),
    ],
)
def test_bad_params_are_named(params: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        generate_jobs("relquery", params, np.array([0.0]), np.random.default_rng(0))


def _block_hit_ratios(jobs: list[JobSpec], block: int = 16) -> np.ndarray:
    """Per relQuery: the share of its prompt tokens a warm prefix cache of ``block``-token blocks holds."""
    ratios = []
    for job in jobs:
        calls = job.stages[0].calls
        hits = sum(min(call.prefix_tokens, call.input_tokens - 1) // block * block for call in calls)
        ratios.append(hits / sum(call.input_tokens for call in calls))
    return np.array(ratios)


def test_template_share_and_cache_hits_vary_per_relquery_around_the_paper_average() -> None:
    jobs = make_workload("relquery", {"process": "poisson", "rate": 1.0}, 1000, {"dataset": "mixed"}, seed=7)
    law = workload_section("relquery", "template_share")
    shares = np.array([job.stages[0].calls[0].prefix_tokens for job in jobs]) / np.array(
        [np.mean([call.input_tokens for call in job.stages[0].calls]) for job in jobs]
    )
    assert np.mean(shares) == pytest.approx(law["mean"], abs=0.03)
    hits = _block_hit_ratios(jobs)
    assert np.mean(hits) == pytest.approx(0.38, abs=0.02)  # the paper's average hit ratio (Fig. 4)
    low, high = np.percentile(hits, [10, 90])
    assert low < 0.25 and high > 0.5 and np.std(hits) > 0.1
    # Rows of one relQuery share one template length; the data leaves their totals as before.
    facts = workload_section("relquery", "datasets_avg_tokens")
    rows = [call.input_tokens for job in jobs if job.template.startswith("amazon/") for call in job.stages[0].calls]
    assert np.mean(rows) == pytest.approx(facts["amazon"]["input"], rel=0.1)


def test_a_fixed_template_share_gives_every_relquery_the_same_share() -> None:
    jobs = make_workload(
        "relquery", {"process": "poisson", "rate": 1.0}, 50, {"dataset": "amazon", "template_share": 0.4}, seed=7
    )
    assert {job.stages[0].calls[0].prefix_tokens for job in jobs} == {round(0.4 * 234)}
