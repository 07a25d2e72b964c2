"""The rows a long benchmark has finished, kept as they finish, so that Ctrl-C shows them instead of
nothing (a bench's figures are otherwise put together at its end).

A row is one finished unit of a bench (a scoreboard of one workload, a limits row): the code that finishes
one calls ``row_finished(name, figures)``; ``evaluation.scoreboard.evaluate`` does so for every scoreboard,
so a bench built on it needs nothing more. Only a run inside ``keeping_rows()`` keeps them (the CLI's
``slosched bench``, through ``bench.base.run_keeping_rows``); elsewhere ``row_finished`` does nothing.
Rows are kept in the process that finished them: the worker processes of ``runners`` run tasks, never rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class FinishedRows:
    """Figures by row name, in the order the rows finished; ``on_row(name)`` after each (a progress line)."""

    rows: dict[str, Any] = field(default_factory=dict)
    on_row: Callable[[str], None] | None = None

    def add(self, name: str, figures: Mapping[str, Any]) -> str:
        """Keep ``figures`` under ``name`` (``name (2)``, ... when a row of that name finished already);
        returns the name it is kept under."""
        key, count = name, 1
        while key in self.rows:
            count += 1
            key = f"{name} ({count})"
        self.rows[key] = dict(figures)
        if self.on_row is not None:
            self.on_row(key)
        return key


_ACTIVE: ContextVar[FinishedRows | None] = ContextVar("slosched_finished_rows", default=None)


def row_finished(name: str, figures: Mapping[str, Any]) -> None:
    """Record a finished row in the run's ``FinishedRows``, if one is being kept."""
    rows = _ACTIVE.get()
    if rows is not None:
        rows.add(name, figures)


@contextlib.contextmanager
def keeping_rows(on_row: Callable[[str], None] | None = None) -> Iterator[FinishedRows]:
    """Keep the rows finished inside the block (a nested block keeps its own)."""
    rows = FinishedRows(on_row=on_row)
    token = _ACTIVE.set(rows)
    try:
        yield rows
    finally:
        _ACTIVE.reset(token)
