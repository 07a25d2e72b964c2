"""``relquery.tokens``: the deterministic token estimate (one token per started 5 characters of a word, one
per punctuation character) and its documented invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.relquery.tokens import CHARS_PER_WORD_TOKEN, count_tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("   \n\t", 0),
        ("a", 1),
        ("hello", 1),  # 5 characters
        ("hellos", 2),  # 6 characters: a second piece
        ("snake_case_name", 3),  # "_" is part of the word: 15 characters
        ("x+y", 3),
        ("...", 3),
        ("SELECT * FROM t;", 2 + 1 + 1 + 1 + 1),
    ],
)
def test_counts(text: str, tokens: int) -> None:
    assert count_tokens(text) == tokens


def test_a_word_costs_one_token_per_started_block() -> None:
    for length in range(1, 4 * CHARS_PER_WORD_TOKEN + 1):
        assert count_tokens("w" * length) == -(-length // CHARS_PER_WORD_TOKEN)


_TEXT = st.text(max_size=60)


@given(a=_TEXT, b=_TEXT)
def test_additive_over_a_space_and_non_negative(a: str, b: str) -> None:
    assert count_tokens(a) >= 0
    assert count_tokens(f"{a} {b}") == count_tokens(a) + count_tokens(b)
