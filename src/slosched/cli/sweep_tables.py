"""The tables ``slosched sweep`` prints: SLO capacity per mix (with its cost), fleet sizing, fleet search."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from slosched.planning.fleet_rows import FleetRow, FleetSearch, MixRow, describe
from slosched.planning.sizing import SizingRow
from slosched.planning.sweep import SweepRow

out = Console(width=None if sys.stdout.isatty() else 140)


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_capacity(rows: list[SweepRow], target: float) -> None:
    table = Table(title=f"SLO capacity (jobs/s at which >= {target:.0%} of jobs meet their SLO)")
    for column in ("workload", "mix", "policy", "90%", "95%", "$/hour", "90% per $/h"):
        table.add_column(column, justify="left" if column in ("workload", "mix", "policy") else "right")
    for row in rows:
        figures = (row.capacity[0.90].text(), row.capacity[0.95].text())
        table.add_row(row.workload, row.mix, row.policy, *figures, _money(row.cost_per_hour), _money(row.per_dollar()))
    out.print(table)


def print_sizing(sizing: list[SizingRow], target: float) -> None:
    table = Table(title=f"Smallest fleet carrying the rate at {target:.0%}")
    for column in ("policy", "group", "gpu", "instances", "$/hour"):
        table.add_column(column)
    for item in sizing:
        count = "> 256" if item.min_count is None else str(item.min_count)
        table.add_row(item.policy, item.group, item.gpu, count, _money(item.cost_per_hour))
    out.print(table)


def _fleet_cells(rank: str, row: FleetRow | MixRow) -> tuple[str, ...]:
    """One table row; a two-type fleet names both types (``+``). A figure from runs cut short once their
    misses decided them is an upper bound (``<=``)."""
    capacity = "-" if row.capacity is None else row.capacity.text()
    if isinstance(row, MixRow):
        gpu, tp, count = (" + ".join(str(cell) for cell in column) for column in zip(*_mix_parts(row), strict=True))
        tried = "-" if row.figure is None else f"{'<=' if row.cut_short else ''}{row.figure:.0%}"
        floor = "-"
    else:
        gpu, tp, count = row.type.gpu, str(row.type.tp), "-" if row.count is None else str(row.count)
        shown = sorted(row.tried.items())
        tried = " ".join(f"{n}:{'<=' if n in row.cut_short else ''}{value:.0%}" for n, value in shown) or "-"
        floor = str(row.floor)
    money = (_money(row.cost_per_hour), capacity, _money(row.per_dollar))
    return (rank, gpu, tp, count, *money, floor, row.status, tried)


def _mix_parts(row: MixRow) -> list[tuple[str, int, int]]:
    return [(kind.gpu, kind.tp, count) for kind, count in row.parts]


def print_search(search: FleetSearch) -> None:
    title = (
        f"Cheapest fleet for {search.rate:g} jobs/s at {search.target:.0%} "
        f"({search.policy}, {search.model}); ranked by $/hour"
    )
    table = Table(title=title)
    columns = (
        "#",
        "gpu",
        "tp",
        "instances",
        "$/hour",
        "capacity",
        "jobs/s per $/h",
        "roofline min",
        "status",
        "attainment by count",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("gpu", "status", "attainment by count") else "right")
    for index, row in enumerate(search.ranked(), start=1):
        table.add_row(*_fleet_cells(str(index) if row.status == "carries" else "", row))
    out.print(table)
    answer = search.answer
    if answer is None:
        out.print(f"answer: no fleet searched carries {search.rate:g} jobs/s at {search.target:.0%}")
        return
    capacity = "-" if answer.capacity is None else f"{answer.capacity.median:.2f}"
    out.print(
        f"answer: {describe(answer.parts)}, ${answer.cost_per_hour:.2f}/hour, "
        f"carries {search.rate:g} jobs/s at {search.target:.0%} (capacity {capacity} jobs/s)"
    )
