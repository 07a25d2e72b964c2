"""The shape every ``slosched bench NAME`` follows, so a new one is one subpackage and one registry line.

A benchmark is a subpackage ``bench/<name>/`` (a small one may be a single module):

- ``setup.py``: what is measured: workloads, clusters, candidates, sizes (quick and full);
- ``runs.py``: the measurement, ``run(quick) -> figures``, built on ``slosched.evaluation`` (workbench,
  SLO capacity, scoreboard, runners, oracle);
- ``report.py``: the markdown page under ``docs/results/`` written from the figures of a full run;
- ``__init__.py``: ``BENCHMARK = Benchmark(...)``, the one object ``bench.registry`` loads by name.

Imports go one way, ``runs -> report -> setup``: a report reads figures and set-up constants and never
imports the runs that made them, so no benchmark has an import circle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slosched.core.errors import SloschedError

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


class BenchmarkFailedError(SloschedError):
    """A benchmark measured, and its figures miss the bound it checks (a done-when): ``slosched bench`` prints
    the figures (``--json`` too), then this error's one ``error:`` line, and exits non-zero."""

    def __init__(self, message: str, figures: Figures) -> None:
        super().__init__(message)
        self.figures = figures
