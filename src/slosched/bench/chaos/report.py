"""What ``slosched bench chaos`` prints: progress while it runs and, at the end, one rich table row per
probe family (pass/fail, counts, what failed) and one per failed probe; all on stderr, so the last line of
stdout stays the JSON object."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from slosched.bench.chaos.core import Probe

COUNTS = ("sent", "clear_4xx", "server_errors", "hangs", "lost", "isolation_violations")


def progress() -> Progress:
    return Progress(
        TextColumn("chaos: {task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    )


def family_rows(probes: Sequence[Probe]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for probe in probes:
        row = rows.setdefault(probe.family, {"probes": 0, "passed": 0, **dict.fromkeys(COUNTS, 0)})
        row["probes"] += 1
        row["passed"] += probe.passed
        for key in COUNTS:
            row[key] += getattr(probe, key)
    return rows


def print_report(probes: Sequence[Probe], totals: dict[str, Any]) -> None:
    console = Console(stderr=True)
    table = Table(title="chaos: probe families")
    for column in ("family", "pass", "probes", "sent", "4xx", "5xx", "hangs", "lost", "isolation"):
        table.add_column(column, justify="left" if column == "family" else "right")
    for family, row in family_rows(probes).items():
        verdict = "[green]pass[/green]" if row["passed"] == row["probes"] else "[red]FAIL[/red]"
        counts = [str(row[key]) for key in COUNTS]
        table.add_row(family, verdict, f"{row['passed']}/{row['probes']}", *counts)
    console.print(table)
    failed = [probe for probe in probes if not probe.passed]
    if failed:
        detail = Table(title=f"chaos: {len(failed)} failed probes (first reasons)")
        detail.add_column("family")
        detail.add_column("probe")
        detail.add_column("failures", justify="right")
        detail.add_column("what failed")
        for probe in failed:
            detail.add_row(probe.family, probe.name, str(probe.num_failures), "\n".join(probe.failures))
        console.print(detail)
    console.print("chaos totals: " + ", ".join(f"{key}={value}" for key, value in totals.items()))
