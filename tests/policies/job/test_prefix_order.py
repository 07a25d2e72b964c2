"""``policies.job.prefix_order``: the field and row order for prefix reuse shared by the table planner and the
gateway's relQuery jobs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from slosched.policies.job.prefix_order import field_order, row_order


def test_the_field_that_repeats_most_goes_first_and_unique_fields_keep_their_order_last() -> None:
    title = ["a", "b", "c", "d"]  # unique: shares nothing
    genre = ["drama", "drama", "comedy", "drama"]
    rated = ["R", "R", "R", "R"]  # one value: repeats most (3 x 1) but over fewer characters than genre's
    assert field_order([title, genre, rated], len) == [1, 2, 0]


def test_a_field_scores_only_within_the_groups_of_the_fields_before_it() -> None:
    first = ["x", "x", "y", "y"]
    # Pairs (first, second): (x, p), (x, q), (y, p), (y, q): second repeats over the table, never within a group.
    second = ["pppp", "qqqq", "pppp", "qqqq"]
    third = ["zz", "zz", "zz", "zz"]
    order = field_order([first, second, third], len)
    assert order[0] == 1  # 'pppp' and 'qqqq' twice each: 8 characters, the most on the whole table
    assert order[1] == 2  # within second's groups, first never repeats ('x'/'y' differ) but third does


def test_no_rows_or_one_row_keeps_the_given_order() -> None:
    assert field_order([["a"], ["b"]], len) == [0, 1]
    assert field_order([[], []], len) == [0, 1]


def test_rows_are_sorted_by_their_leading_values_ties_in_table_order() -> None:
    keys = [("b", "1"), ("a", "2"), ("b", "0"), ("a", "2")]
    assert row_order(keys) == [1, 3, 2, 0]


@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("xyz")), max_size=40))
def test_row_order_is_a_permutation_with_equal_leading_values_adjacent(keys: list[tuple[str, str]]) -> None:
    order = row_order(keys)
    assert sorted(order) == list(range(len(keys)))
    leads = [keys[row][0] for row in order]
    seen: list[str] = []
    for lead in leads:  # each leading value forms one run
        if not seen or seen[-1] != lead:
            assert lead not in seen
            seen.append(lead)
