"""Templates, the token estimate and relQuery plans (prefix structure, errors, simulated job)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from slosched.core.job import JobKind, validate_job
from slosched.relquery import PromptTemplate, count_tokens, plan_relquery
from slosched.workloads.trace_io import job_from_line, job_to_line


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "reviews.csv"
    path.write_text('id,text\n1,"Great phone, battery lasts."\n2,"Broke after a week"\n', encoding="utf-8")
    return path


def test_token_estimate_is_deterministic_and_additive() -> None:
    assert count_tokens("") == 0
    assert count_tokens("Hi, you.") == 4  # Hi , you .
    assert count_tokens("internationalization") == 4  # 20 characters, one token per 5
    a, b = "Classify the review:", "Broke after a week!"
    assert count_tokens(f"{a} {b}") == count_tokens(a) + count_tokens(b)


def test_template_prefix_and_columns() -> None:
    template = PromptTemplate.parse("Rate {{0-5}}: {text} (id {id}, {text})")
    assert template.columns == ("text", "id")
    assert template.prefix == "Rate {0-5}: "
    assert template.render({"text": "ok", "id": None}) == "Rate {0-5}: ok (id , ok)"
    for bad in ("", "no placeholders", "{0}", "{text!r}", "{text:>5}", "{a.b}", "{unclosed"):
        with pytest.raises(ConfigError, match="template"):
            PromptTemplate.parse(bad)


def test_plan_keeps_the_shared_template_prefix(table: Path) -> None:
    plan = plan_relquery(str(table), "Is this review positive? Answer yes or no. Review: {text}", 3)
    assert plan.num_rows == 2
    assert plan.template_tokens == count_tokens("Is this review positive? Answer yes or no. Review: ")
    assert plan.row_tokens == (count_tokens("Great phone, battery lasts."), count_tokens("Broke after a week"))
    job = plan.to_job("q1", arrival_s=2.0)
    validate_job(job)
    assert job.kind is JobKind.RELQUERY and job.arrival_s == 2.0
    calls = job.stages[0].calls
    assert {call.prefix_key for call in calls} == {"q1/template"}
    assert [call.input_tokens for call in calls] == [plan.template_tokens + n for n in plan.row_tokens]
    assert all(call.output_tokens == call.max_output_tokens == 3 for call in calls)
    assert job_from_line(job_to_line(job)) == job


def test_plan_errors_name_the_problem(table: Path) -> None:
    with pytest.raises(ConfigError, match="no rows matching"):
        plan_relquery(str(table), "Review: {text}", 3, where="id > 5")
    with pytest.raises(ConfigError, match="row 0"):
        plan_relquery(str(table), "Review: {text}", 3, max_model_len=8)
    with pytest.raises(ConfigError, match="available: id, text"):
        plan_relquery(str(table), "Review: {body}", 3)
    with pytest.raises(ConfigError, match="max_tokens"):
        plan_relquery(str(table), "Review: {text}", 0)
    plan = plan_relquery(str(table), "Review: {text}", 3)
    with pytest.raises(ConfigError, match="output_tokens"):
        plan.to_job(output_tokens=4)
