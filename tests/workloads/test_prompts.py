"""Token-id prompts: exact length, shared prefixes by key, nothing shared otherwise."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.workloads.prompts import prompt_ids


@settings(deadline=None)  # numpy generator set-up; the machine is shared and noisy
@given(st.integers(1, 3000), st.integers(0, 2**40), st.integers(0, 3000))
def test_length_and_id_range(length: int, salt: int, prefix: int) -> None:
    ids = prompt_ids(length, salt, "k", prefix)
    assert len(ids) == length and all(3 <= i < 93 for i in ids)  # printable ASCII byte tokens


def test_calls_sharing_a_key_share_exactly_the_prefix() -> None:
    a, b = prompt_ids(300, 1, "schema", 200), prompt_ids(250, 2, "schema", 200)
    assert a[:200] == b[:200] and a[200:210] != b[200:210]
    assert prompt_ids(300, 1, "other", 200)[:50] != a[:50]


def test_different_salts_share_nothing_and_equal_salts_repeat() -> None:
    assert prompt_ids(64, 5)[:8] != prompt_ids(64, 6)[:8]
    assert prompt_ids(64, 5) == prompt_ids(64, 5)
