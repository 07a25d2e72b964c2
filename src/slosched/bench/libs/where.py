"""``where``: compiling one ``--where`` filter (``relquery/where.py``, run once per ``slosched relquery``) vs
sqlglot parsing the same text (``parse_one(..., dialect="duckdb")``): a lower bound for the library's way,
which would still need a walk of the tree that admits only columns, literals and the allowed operators, and
rebuilds the SQL with bound parameters. ``extras``: what importing sqlglot adds to ``slosched relquery``'s
start (a fresh interpreter that already imported ``slosched.relquery``): a one-shot command pays it once."""

from __future__ import annotations

import statistics
import subprocess
import sys
from importlib.metadata import version
from typing import Any

from slosched.bench.libs.setup import Pair

_COLUMNS = ["id", "title", "year", "score", "genre"]
_FILTER = (
    "year >= 2005 AND score BETWEEN 6.5 AND 9 AND (genre IN ('drama', 'crime', 'war') OR title ILIKE '%the%') "
    "AND NOT (id = 3) AND title IS NOT NULL"
)


def pairs() -> list[Pair]:
    import sqlglot

    from slosched.relquery.where import compile_where

    def ours() -> None:
        compile_where(_FILTER, _COLUMNS)

    def theirs() -> None:
        sqlglot.parse_one(_FILTER, dialect="duckdb")

    return [Pair("where", f"sqlglot {version('sqlglot')}", ours, theirs, 1, "filter", reps=200)]


def _added_import_ms(module: str, rounds: int = 3) -> float:
    """What importing ``module`` adds, in a fresh interpreter, to a process that already imported
    ``slosched.relquery`` (duckdb and the rest of ``slosched relquery``'s imports)."""
    code = (
        "import time, slosched.relquery; s = time.perf_counter(); "
        f"import {module}; print((time.perf_counter() - s) * 1e3)"
    )
    runs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True) for _ in range(rounds)
    ]
    return statistics.median(float(run.stdout) for run in runs)


def extras() -> dict[str, Any]:
    import sqlglot  # noqa: F401  (only to skip this figure when it is missing)

    return {"where_library_import_ms": round(_added_import_ms("sqlglot"), 1)}
