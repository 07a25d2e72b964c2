"""``relquery.template``: placeholder parsing (columns, shared prefix, refused fields) and row rendering."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.relquery.template import PromptTemplate

_LITERAL = st.text(alphabet=st.characters(exclude_characters="{}", codec="utf-8"), max_size=20)
_COLUMN = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)


def test_columns_are_in_first_appearance_order_without_repeats() -> None:
    template = PromptTemplate.parse("Q: {question} A: {answer} again {question}")
    assert template.columns == ("question", "answer")
    assert template.prefix == "Q: "
    assert template.text == "Q: {question} A: {answer} again {question}"


def test_escaped_braces_are_literal_in_prefix_and_prompt() -> None:
    template = PromptTemplate.parse("{{json}} {x}")
    assert template.prefix == "{json} "
    assert template.render({"x": 1}) == "{json} 1"


def test_render_formats_values_and_nulls() -> None:
    template = PromptTemplate.parse("{a}|{b}|{c}|{d}")
    assert template.render({"a": None, "b": 3.0, "c": 2.5, "d": "txt", "unused": 9}) == "|3|2.5|txt"


def test_render_names_the_missing_columns() -> None:
    template = PromptTemplate.parse("{a} {b}")
    with pytest.raises(ConfigError, match=r"row lacks columns \['b'\]"):
        template.render({"a": 1})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("   ", "non-empty"),
        ("plain text", "no {column} placeholder"),
        ("{}", "plain column name"),
        ("{1}", "plain column name"),
        ("{a!s}", "plain column name"),
        ("{a:10}", "plain column name"),
        ("{a[0]}", "plain column name"),
        ("{a.__class__}", "plain column name"),
        ("{oops", "malformed braces"),
        ("oops}", "malformed braces"),
    ],
)
def test_refused_templates_name_the_reason(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match="template") as error:
        PromptTemplate.parse(text)
    assert message in str(error.value)


@given(head=_LITERAL, column=_COLUMN, tail=_LITERAL, value=_LITERAL)
def test_every_prompt_starts_with_the_shared_prefix(head: str, column: str, tail: str, value: str) -> None:
    template = PromptTemplate.parse(f"{head}{{{column}}}{tail}")
    assert template.prefix == head
    assert template.columns == (column,)
    prompt = template.render({column: value})
    assert prompt == head + value + tail
    assert prompt.startswith(template.prefix)
