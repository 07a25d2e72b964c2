"""``relquery.order`` and plans sent in an order: record-form templates, field and row reordering, the
prefix reuse it buys, and the prefix groups the simulated job carries."""

from __future__ import annotations

from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from slosched.core.job import validate_job
from slosched.relquery.order import adjacent_shared_tokens, record_layout, shared_tokens
from slosched.relquery.plan import plan_relquery
from slosched.relquery.template import PromptTemplate

RECORD = "Is this film a drama? Answer yes or no.\nTitle: {title}\nGenre: {genre}\nRated: {rated}"


@pytest.fixture
def films(tmp_path: Path) -> Path:
    path = tmp_path / "films.csv"
    rows = [
        ("Alpha", "drama", "R"),
        ("Bravo", "comedy", "PG"),
        ("Charlie", "drama", "R"),
        ("Delta", "comedy", "PG"),
        ("Echo", "drama", "R"),
        ("Foxtrot", "drama", "PG"),
    ]
    path.write_text("title,genre,rated\n" + "".join(f"{t},{g},{r}\n" for t, g, r in rows), encoding="utf-8")
    return path


def test_record_form_is_an_instruction_then_one_placeholder_per_line() -> None:
    layout = record_layout(PromptTemplate.parse(RECORD + "\nAnswer:"))
    assert layout is not None
    assert layout.lines == ("Title: {title}", "Genre: {genre}", "Rated: {rated}")
    assert layout.tail == "\nAnswer:"
    assert record_layout(PromptTemplate.parse("Title: {title}\nGenre: {genre}")) is None  # no instruction
    assert record_layout(PromptTemplate.parse("Say hi.\nTitle: {title} ({genre})")) is None  # two on a line


def test_fields_order_puts_repeated_fields_first_and_sorts_rows(films: Path) -> None:
    table = plan_relquery(films, RECORD, 2)
    fields = plan_relquery(films, RECORD, 2, order="fields")
    assert fields.template.text.split("\n")[1:] == ["Genre: {genre}", "Rated: {rated}", "Title: {title}"]
    assert sorted(fields.table_rows) == list(range(6))
    assert list(fields.prompts) == sorted(fields.prompts)
    assert fields.adjacent_shared_tokens > table.adjacent_shared_tokens
    assert fields.summary()["order"] == "fields"


def test_rows_order_keeps_the_template_and_sorts_the_prompts(films: Path) -> None:
    plan = plan_relquery(films, RECORD, 2, order="rows")
    assert plan.template.text == RECORD
    assert list(plan.prompts) == sorted(plan.prompts)
    assert plan.table_rows == (0, 1, 2, 3, 4, 5)  # titles are unique and already sorted


def test_the_simulated_job_groups_rows_whose_leading_fields_repeat(films: Path) -> None:
    plan = plan_relquery(films, RECORD, 2, order="fields")
    job = plan.to_job("rq")
    validate_job(job)
    calls = job.stages[0].calls
    groups = [call.group_key for call in calls if call.group_key is not None]
    # Genre then rating lead: (drama, R) x3 and (comedy, PG) x2 are groups; (drama, PG) is alone, so its row
    # carries no group (the depth is chosen once for the plan: the one that saves the most tokens).
    assert len(groups) == 5
    assert all(groups.count(group) >= 2 for group in groups)
    grouped = [call for call in calls if call.group_key is not None]
    assert all(0 < call.group_tokens < call.input_tokens - call.prefix_tokens for call in grouped)


def test_a_table_order_plan_of_unique_rows_has_no_groups(films: Path) -> None:
    plan = plan_relquery(films, "Summarise {title}.", 2)
    assert plan.groups() == [None] * 6


def test_fields_on_a_free_text_template_and_an_unknown_order_fail_naming_the_order(films: Path) -> None:
    with pytest.raises(ConfigError, match="record form"):
        plan_relquery(films, "Is {title} ({genre}) a drama?", 2, order="fields")
    with pytest.raises(ConfigError, match="allowed: table, rows, fields"):
        plan_relquery(films, RECORD, 2, order="sorted")


def test_shared_tokens_count_whole_words_only() -> None:
    assert shared_tokens("Genre: drama. Title: Alpha", "Genre: drama. Title: Bravo") == shared_tokens(
        "Genre: drama. Title: ", "Genre: drama. Title: "
    )
    assert shared_tokens("same text", "same text") > 0
    assert shared_tokens("abc", "abd") == 0
    assert adjacent_shared_tokens(["x y", "x z"])[0] == 0
