"""How figures are printed: numbers, median [min-max] spreads, ratios, and the figures table on stderr.

One place, so every report and every printed figure says the same thing the same way. Two number
formats differ on purpose: ``fixed`` prints a missing or non-finite figure as ``n/a`` (a figure that could
not be measured), ``fixed_or_inf`` prints it as ``inf`` (a capacity or SLO scale with no upper bound).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

NumberFormat = Callable[[Any, int], str]


def fixed(value: Any, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals; ``n/a`` when it is not a finite number (None, NaN, inf, text)."""
    return f"{value:.{digits}f}" if isinstance(value, float | int) and math.isfinite(value) else "n/a"


def times(value: Any) -> str:
    """A ratio as ``1.23x``; ``n/a`` where there is none (e.g. the baseline's goodput was 0)."""
    return f"{fixed(value)}x" if isinstance(value, float | int) and math.isfinite(value) else fixed(value)


def fixed_or_inf(value: float, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals; ``inf`` when it is not finite (an unbounded figure)."""
    return "inf" if not math.isfinite(value) else f"{value:.{digits}f}"


def spread(entry: Mapping[str, Any], digits: int = 3, number: NumberFormat = fixed) -> str:
    """A figure over seeds as ``median [min-max]`` (``entry`` holds ``median``, ``min`` and ``max``, as
    ``Spread.as_json`` writes them)."""
    return f"{number(entry['median'], digits)} [{number(entry['min'], digits)}-{number(entry['max'], digits)}]"


def spread_over_seeds(entry: Mapping[str, Any], digits: int = 2) -> str:
    """``spread``, but only the median where ``entry['per_seed']`` holds one seed (a range of one value
    would claim a spread that was never measured)."""
    if len(entry["per_seed"]) == 1:
        return fixed(entry["median"], digits)
    return spread(entry, digits)


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``; NaN where the denominator is not a finite positive number."""
    return numerator / denominator if denominator > 0 and math.isfinite(denominator) else math.nan


def finite_ratio(numerator: float, denominator: float) -> float:
    """``ratio``, and NaN where the numerator is not finite either (an unbounded figure has no ratio)."""
    return ratio(numerator, denominator) if math.isfinite(numerator) else math.nan


def print_figures(title: str, figures: dict[str, Any]) -> None:
    """``figures`` as a two-column table on stderr (stdout carries the JSON)."""
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in figures.items():
        text = f"{value:,.3f}" if isinstance(value, float) else str(value)
        table.add_row(key, text)
    Console(stderr=True).print(table)
