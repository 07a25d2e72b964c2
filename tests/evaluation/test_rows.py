"""Finished rows are kept only while a run keeps them, in finishing order, under unique names."""

from __future__ import annotations

from slosched.evaluation.rows import keeping_rows, row_finished


def test_rows_are_kept_in_order_under_unique_names_and_announced() -> None:
    announced: list[str] = []
    with keeping_rows(announced.append) as finished:
        row_finished("chat", {"capacity": 1.0})
        row_finished("code", {"capacity": 2.0})
        row_finished("chat", {"capacity": 3.0})
    assert list(finished.rows) == ["chat", "code", "chat (2)"] == announced
    assert finished.rows["chat (2)"] == {"capacity": 3.0}


def test_nothing_is_kept_outside_a_run_that_keeps_rows_and_a_nested_run_keeps_its_own() -> None:
    row_finished("lost", {"x": 1})  # no run keeps rows: nothing happens, nothing fails
    with keeping_rows() as outer:
        with keeping_rows() as inner:
            row_finished("inner", {})
        row_finished("outer", {})
    assert list(inner.rows) == ["inner"] and list(outer.rows) == ["outer"]
