"""``workloads.relquery``: the relQuery job shape, the synthetic generator's parameters and template shares."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.core.job import JobKind, JobSpec, validate_job
from slosched.workloads.bundled import workload_section
from slosched.workloads.relquery import DATASETS, QUERY_TYPES, RELQUERY_STAGE, relquery, relquery_job, template_shares


def make_jobs(count: int = 30, seed: int = 5, **params: Any) -> list[JobSpec]:
    return relquery(params, np.arange(count, dtype=np.float64), np.random.default_rng(seed))


def test_relquery_job_shares_one_template_prefix() -> None:
    job = relquery_job("q", 2.0, 100, [(10, 3), (0, 1)], 16, slo_s=9.0, template="t")
    validate_job(job)
    assert job.kind is JobKind.RELQUERY and job.arrival_s == 2.0 and job.slo_s == 9.0 and job.template == "t"
    (stage,) = job.stages
    assert stage.name == RELQUERY_STAGE
    assert [(c.input_tokens, c.output_tokens, c.max_output_tokens) for c in stage.calls] == [(110, 3, 16), (100, 1, 16)]
    assert {(c.prefix_key, c.prefix_tokens) for c in stage.calls} == {("q/template", 100)}


def test_generator_follows_its_parameters() -> None:
    jobs = make_jobs(
        dataset="rotten", query_type="classify", min_rows=3, max_rows=5, template_share=0.5, slo_s=20, id_prefix="r"
    )
    limit = workload_section("relquery", "query_types_output_limit")["classify"]
    mean_in = workload_section("relquery", "datasets_avg_tokens")["rotten"]["input"]
    assert [job.id for job in jobs[:2]] == ["r-0", "r-1"]
    for index, job in enumerate(jobs):
        validate_job(job)
        assert job.template == "rotten/classify" and job.slo_s == 20.0 and job.arrival_s == index
        calls = job.stages[0].calls
        assert 3 <= len(calls) <= 5
        assert {c.prefix_tokens for c in calls} == {round(0.5 * mean_in)}
        assert all(c.max_output_tokens == limit and 1 <= c.output_tokens <= limit for c in calls)
        assert all(c.input_tokens > c.prefix_tokens for c in calls)
    assert len({len(job.stages[0].calls) for job in jobs}) > 1


def test_zero_cv_gives_equal_rows() -> None:
    jobs = make_jobs(dataset="amazon", query_type="rate", template_share=0.0, length_cv=0)
    facts = workload_section("relquery", "datasets_avg_tokens")["amazon"]
    limit = workload_section("relquery", "query_types_output_limit")["rate"]
    for job in jobs:
        assert {c.input_tokens for c in job.stages[0].calls} == {round(facts["input"])}
        assert {c.output_tokens for c in job.stages[0].calls} == {min(round(facts["output"]), limit)}
        assert {c.prefix_tokens for c in job.stages[0].calls} == {0}


def test_mixed_draws_cover_datasets_and_query_types() -> None:
    templates = {job.template for job in make_jobs(count=200, dataset="mixed")}
    assert {t.split("/")[0] for t in templates} == set(DATASETS)
    assert {t.split("/")[1] for t in templates} == set(QUERY_TYPES)


def test_template_shares_follow_the_law() -> None:
    law = workload_section("relquery", "template_share")
    shares = template_shares(np.random.default_rng(0), 5000)
    assert shares.min() >= law["min"] and shares.max() <= law["max"]
    assert shares.mean() == pytest.approx(law["mean"], abs=0.05)
    assert len(np.unique(shares)) > 100


def test_deterministic_by_seed() -> None:
    assert make_jobs(seed=1) == make_jobs(seed=1)
    assert make_jobs(seed=1) != make_jobs(seed=2)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"template_share": 1.0}, "relquery.template_share"),
        ({"template_share": -0.1}, "relquery.template_share"),
        ({"min_rows": 5, "max_rows": 4}, "relquery.max_rows"),
        ({"dataset": "imdb"}, "relquery.dataset"),
        ({"query_type": "join"}, "relquery.query_type"),
        ({"rows": 3}, "relquery params"),
    ],
)
def test_bad_parameters_are_named(params: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as error:
        make_jobs(**params)
    assert error.value.field == field
