"""The shape every ``slosched bench NAME`` follows, so a new one is one subpackage and one registry line.

A benchmark is a subpackage ``bench/<name>/`` (a small one may be a single module):

- ``setup.py``: what is measured: workloads, clusters, candidates, sizes (quick and full);
- ``runs.py``: the measurement, ``run(quick) -> figures``, built on ``slosched.evaluation`` (workbench,
  SLO capacity, scoreboard, runners, oracle);
- ``report.py``: the markdown page under ``docs/results/`` written from the figures of a full run;
- ``__init__.py``: ``BENCHMARK = Benchmark(...)``, the one object ``bench.registry`` loads by name.

Imports go one way, ``runs -> report -> setup``: a report reads figures and set-up constants and never
imports the runs that made them, so no benchmark has an import circle.

Ctrl-C keeps what finished: ``run_keeping_rows`` runs a benchmark while keeping each row it finishes
(``evaluation.rows``: every scoreboard is one, and ``row_finished`` names others), and turns an interruption
into ``Interrupted`` carrying those rows' figures marked ``partial``. A bench writes its report page at its
end, from all its figures, so an interrupted run writes none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from slosched.core.errors import Interrupted, SloschedError
from slosched.evaluation.rows import keeping_rows

Figures = dict[str, Any]
"""What a run returns: JSON-able figures (``slosched bench NAME --json`` prints them as its last line)."""


@dataclass(frozen=True, slots=True)
class Benchmark:
    """One benchmark. ``run(quick)`` measures (``quick``: the small version CI and ``--quick`` run; full:
    the published one, which also writes its report page), prints its headline figures on stderr and
    returns all of them; the same ``quick`` gives the same figures, wall-clock and speed figures aside."""

    name: str  # the command-line name, ``slosched bench NAME``
    summary: str  # one line: what it measures
    run: Callable[[bool], Figures]


class BenchmarkFailed(SloschedError):
    """A run that measured nothing (a row's jobs all refused, no request reaching a server), or whose figures
    miss the bound it checks (a done-when; ``figures`` then holds them): the CLI prints the figures when
    there are any (``--json`` too), then one ``error:`` line, and exits non-zero, instead of printing a
    failed run as if it were a result."""

    def __init__(self, message: str, figures: Figures | None = None) -> None:
        super().__init__(message)
        self.figures = figures


def check_row(row: str, statuses: Sequence[str], server_requests: Iterable[float] | None = None) -> None:
    """Fail loudly when ``row`` was not measured: every job ``rejected`` (a status ``rejected...``) or, with
    ``server_requests`` (requests counted at each server during the row), none reaching a server."""
    rejected = [status for status in statuses if status.startswith("rejected")]
    if statuses and len(rejected) == len(statuses):
        raise BenchmarkFailed(f"{row}: all {len(statuses)} jobs were rejected ({rejected[0]}); nothing was measured")
    if server_requests is not None and statuses and not sum(server_requests) > 0:
        raise BenchmarkFailed(f"{row}: no request reached the servers; nothing was measured")


def run_keeping_rows(benchmark: Benchmark, quick: bool, on_row: Callable[[str], None] | None = None) -> Figures:
    """``benchmark.run(quick)``; on Ctrl-C (or anything raising ``KeyboardInterrupt``) an ``Interrupted``
    whose ``partial`` is the figures of the rows that finished, marked partial (``partial_figures``).
    ``on_row(name)`` after each finished row."""
    with keeping_rows(on_row) as finished:
        try:
            return benchmark.run(quick)
        except KeyboardInterrupt:
            raise Interrupted(partial_figures(benchmark.name, quick, finished.rows)) from None


def partial_figures(name: str, quick: bool, rows: dict[str, Any]) -> Figures:
    """What an interrupted run shows: the rows that finished, in order, flagged ``partial``."""
    return {
        "bench": name,
        "mode": "quick" if quick else "full",
        "partial": True,
        "finished_rows": list(rows),
        "rows": rows,
    }
