"""``evaluation.formatting``: both number formats (``n/a`` and ``inf`` for what is not a finite number),
spreads over seeds, ratios and the printed figures table."""

from __future__ import annotations

import math

import pytest

from slosched.evaluation.capacity import Spread
from slosched.evaluation.formatting import (
    finite_ratio,
    fixed,
    fixed_or_inf,
    print_figures,
    ratio,
    spread,
    spread_over_seeds,
)


@pytest.mark.parametrize(
    ("value", "digits", "expected"),
    [
        (1.23456, 2, "1.23"),
        (2, 3, "2.000"),
        (math.nan, 2, "n/a"),
        (math.inf, 2, "n/a"),
        (None, 2, "n/a"),
        ("1.0", 2, "n/a"),
        (-0.5, 1, "-0.5"),
    ],
)
def test_fixed_says_n_a_for_what_was_not_measured(value: object, digits: int, expected: str) -> None:
    assert fixed(value, digits) == expected


@pytest.mark.parametrize(
    ("value", "digits", "expected"),
    [(1.23456, 2, "1.23"), (3.0, 1, "3.0"), (math.inf, 2, "inf"), (-math.inf, 2, "inf"), (math.nan, 2, "inf")],
)
def test_fixed_or_inf_says_inf_for_an_unbounded_figure(value: float, digits: int, expected: str) -> None:
    assert fixed_or_inf(value, digits) == expected


def test_the_two_number_formats_differ_only_where_a_figure_is_not_finite() -> None:
    for value in (0.0, 0.125, 7.5, 1e3):
        assert fixed(value, 3) == fixed_or_inf(value, 3)
    assert (fixed(math.inf), fixed_or_inf(math.inf)) == ("n/a", "inf")


def test_spread_reads_what_spread_as_json_writes() -> None:
    entry = Spread.of([1.0, 2.5, 4.0]).as_json()
    assert spread(entry) == "2.500 [1.000-4.000]"
    assert spread(entry, 1) == "2.5 [1.0-4.0]"
    assert spread(Spread.of([]).as_json()) == "n/a [n/a-n/a]"
    assert spread({"median": math.inf, "min": 1.0, "max": math.inf}, 2, fixed_or_inf) == "inf [1.00-inf]"


def test_spread_over_seeds_shows_no_range_for_one_seed() -> None:
    assert spread_over_seeds({"median": 0.5, "min": 0.5, "max": 0.5, "per_seed": [0.5]}) == "0.50"
    entry = {"median": 0.5, "min": 0.25, "max": 0.75, "per_seed": [0.25, 0.5, 0.75]}
    assert spread_over_seeds(entry) == "0.50 [0.25-0.75]"


def test_ratio_is_nan_without_a_finite_positive_denominator() -> None:
    assert ratio(3.0, 2.0) == 1.5
    for denominator in (0.0, -1.0, math.inf, math.nan):
        assert math.isnan(ratio(1.0, denominator))
    assert ratio(math.inf, 2.0) == math.inf  # an unbounded numerator stays unbounded...
    assert math.isnan(finite_ratio(math.inf, 2.0))  # ...unless the ratio must be finite
    assert finite_ratio(3.0, 2.0) == 1.5 and math.isnan(finite_ratio(3.0, 0.0))


def test_print_figures_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    print_figures("demo", {"rate": 1234.5678, "identical": True, "count": 7})
    out, err = capsys.readouterr()
    assert out == ""
    assert "demo" in err and "1,234.568" in err and "True" in err and "7" in err
