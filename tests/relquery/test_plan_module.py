"""``relquery.plan`` directly: the plan's derived figures (input tokens, shared share, summary), the job it
becomes (assumed output lengths, an empty row's own part) and the limits it checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from slosched.core.job import JobKind, validate_job
from slosched.relquery.plan import RelQueryPlan, plan_relquery
from slosched.relquery.template import PromptTemplate
from slosched.relquery.tokens import count_tokens

TEMPLATE = "Label the product title as food or not. Title: {title}"


@pytest.fixture
def products(tmp_path: Path) -> Path:
    path = tmp_path / "products.csv"
    path.write_text('id,title\n1,"Organic green tea, 20 bags"\n2,\n3,"USB cable"\n', encoding="utf-8")
    return path


def make_plan(rows: tuple[int, ...] = (4, 0, 6), template_tokens: int = 10, max_output: int = 8) -> RelQueryPlan:
    prompts = tuple("p" for _ in rows)
    return RelQueryPlan("t.csv", PromptTemplate.parse("x {a}"), max_output, template_tokens, rows, prompts, 30.0)


def test_derived_figures() -> None:
    plan = make_plan()
    assert plan.num_rows == 3
    assert plan.input_tokens == 3 * 10 + 10
    assert plan.shared_share == pytest.approx(30 / 40)
    summary = plan.summary()
    assert summary == {
        "source": "t.csv",
        "columns": ["a"],
        "num_rows": 3,
        "template_tokens": 10,
        "row_tokens_mean": pytest.approx(10 / 3),
        "row_tokens_max": 6,
        "input_tokens": 40,
        "max_output_tokens": 8,
        "shared_share": pytest.approx(0.75),
        "order": "table",
        # Each prompt "p" repeats the one before it whole: one token shared, twice, of 40.
        "adjacent_shared_share": pytest.approx(2 / 40),
    }


def test_shared_share_of_an_empty_prompt_is_zero() -> None:
    assert make_plan(rows=(0,), template_tokens=0).shared_share == 0.0


def test_to_job_assumes_output_tokens_and_keeps_every_row_non_empty() -> None:
    job = make_plan().to_job("rq", arrival_s=1.5, output_tokens=3)
    validate_job(job)
    assert job.kind is JobKind.RELQUERY and job.id == "rq" and job.arrival_s == 1.5 and job.slo_s == 30.0
    calls = job.stages[0].calls
    # The empty row still computes one token of its own after the shared template.
    assert [call.input_tokens for call in calls] == [14, 11, 16]
    assert {call.prefix_tokens for call in calls} == {10}
    assert {(call.output_tokens, call.max_output_tokens) for call in calls} == {(3, 8)}
    assert [call.output_tokens for call in make_plan().to_job().stages[0].calls] == [8, 8, 8]
    for bad in (0, 9):
        with pytest.raises(ConfigError, match=r"output_tokens: must be in \[1, 8\]"):
            make_plan().to_job(output_tokens=bad)


def test_plan_of_a_table_with_a_null_row(products: Path) -> None:
    plan = plan_relquery(str(products), TEMPLATE, 4, slo_s=12.0)
    prefix = "Label the product title as food or not. Title: "
    assert plan.template_tokens == count_tokens(prefix)
    assert plan.prompts == (prefix + "Organic green tea, 20 bags", prefix, prefix + "USB cable")
    assert plan.row_tokens == (count_tokens("Organic green tea, 20 bags"), 0, count_tokens("USB cable"))
    assert plan.slo_s == 12.0 and plan.max_output_tokens == 4
    assert plan_relquery(str(products), TEMPLATE, 4, max_rows=2).num_rows == 2


def test_the_model_length_is_checked_per_row(products: Path) -> None:
    prefix_tokens = count_tokens("Label the product title as food or not. Title: ")
    longest = prefix_tokens + count_tokens("Organic green tea, 20 bags")
    assert plan_relquery(str(products), TEMPLATE, 4, max_model_len=longest + 4).num_rows == 3
    with pytest.raises(ConfigError, match=rf"row 0: prompt of {longest} tokens \+ max_tokens 5 exceeds"):
        plan_relquery(str(products), TEMPLATE, 5, max_model_len=longest + 4)


@pytest.mark.parametrize("slo_s", [0.0, -1.0])
def test_a_non_positive_slo_is_refused(products: Path, slo_s: float) -> None:
    with pytest.raises(ConfigError, match="slo_s"):
        plan_relquery(str(products), TEMPLATE, 4, slo_s=slo_s)
