"""The SQLite side of the Text-to-SQL workflow runner: extracting SQL from model output, executing it
read-only with a timeout and a row cap, unit-test checks on results, and the majority vote.

Invariants: ``execute_sql`` never raises for bad SQL (every failure is an ``ExecResult`` with ``error``
set), never writes (read-only URI + ``PRAGMA query_only`` + an authorizer that allows reads only) and never
runs past ``timeout_s`` (a progress handler interrupts the statement) or returns more than ``max_rows`` rows.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from slosched.core.errors import ConfigError

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
# A query starts at SELECT or at a CTE head (``WITH name [(cols)] AS (``, so the English "with" is no match).
_START_PATTERN = r"\bSELECT\b|\bWITH\s+(?:RECURSIVE\s+)?[\w\"`\[\]]+\s*(?:\([^)]*\)\s*)?AS\s*\("
# Upper-case keywords first: prose says "select the rows", queries say SELECT.
_STARTS = (re.compile(_START_PATTERN), re.compile(_START_PATTERN, re.IGNORECASE))
_JSON_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)
# Authorizer actions a read-only query needs; everything else (writes, ATTACH, PRAGMA, DDL) is denied.
_READ_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
_PROGRESS_OPS = 1_000  # SQLite VM instructions between deadline checks (~tens of microseconds)


def extract_sql(text: str | None) -> str | None:
    """The first SELECT/WITH query in model output, or None.

    A fenced code block (preferring one tagged ``sql``) is searched first, then the whole text; in each,
    an upper-case keyword is preferred to a lower-case one. The query runs from the SELECT/WITH keyword
    to the first ``;`` or blank line outside string literals (models often add an explanation after the
    query), or to the end. A ``sql``-tagged block without either keyword is returned as written (cut the
    same way): it is what the model meant as SQL, and SQLite's error on it is the best revision hint.
    """
    if not text:
        return None
    fences = [(tag.lower(), body) for tag, body in _FENCE.findall(text)]
    ordered = [body for tag, body in fences if tag == "sql"] + [body for tag, body in fences if tag != "sql"]
    for source in [*ordered, text]:
        for start in _STARTS:
            match = start.search(source)
            if match:
                return _cut_statement(source[match.start() :]).strip()
    tagged = [_cut_statement(body).strip() for tag, body in fences if tag == "sql"]
    return next((sql for sql in tagged if sql), None)


def _cut_statement(text: str) -> str:
    """``text`` up to its first top-level ``;`` or blank line (quoted text and -- comments are skipped)."""
    closing = {"'": "'", '"': '"', "`": "`", "[": "]"}
    quote: str | None = None
    index = 0
    while index < len(text):
        char = text[index]
        if quote is not None:
            if char == quote:
                quote = None
        elif char in closing:
            quote = closing[char]
        elif text.startswith("--", index):  # a line comment may hold quotes or ';': skip to its end
            end = text.find("\n", index)
            index = len(text) if end < 0 else end
            continue
        elif char == ";" or (char == "\n" and text[index + 1 : index + 2] == "\n"):
            return text[:index]
        index += 1
    return text


@dataclass(slots=True, frozen=True)
class ExecResult:
    """One execution: the rows (at most ``max_rows``; ``truncated`` when more existed) or the error."""

    sql: str
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    error: str | None = None
    timed_out: bool = False
    truncated: bool = False
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


def _authorize(action: int, *args: object) -> int:
    return sqlite3.SQLITE_OK if action in _READ_ACTIONS else sqlite3.SQLITE_DENY


def execute_sql(db_path: str | Path, sql: str, timeout_s: float = 2.0, max_rows: int = 1000) -> ExecResult:
    """Run one statement on a read-only connection (see the module invariants). Blocking: call it from a
    worker thread in async code."""
    start = time.monotonic()
    deadline = start + timeout_s
    try:
        connection = sqlite3.connect(f"{Path(db_path).resolve().as_uri()}?mode=ro", uri=True, timeout=timeout_s,
                                     check_same_thread=False)  # fmt: skip
    except sqlite3.Error as error:
        return ExecResult(sql, error=f"cannot open database: {error}", elapsed_s=time.monotonic() - start)
    try:
        connection.execute("PRAGMA query_only = ON")
        connection.set_authorizer(_authorize)
        connection.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_OPS)
        cursor = connection.execute(sql)
        rows = cursor.fetchmany(max_rows + 1)
        columns = tuple(str(column[0]) for column in cursor.description or ())
    except (sqlite3.Error, sqlite3.Warning) as error:  # Python 3.11 reports two statements as a Warning
        elapsed = time.monotonic() - start
        if time.monotonic() > deadline and "interrupt" in str(error):
            return ExecResult(sql, error=f"query timed out after {timeout_s:g} s", timed_out=True, elapsed_s=elapsed)
        hint = " (read-only: a single SELECT query only)" if "not authorized" in str(error) else ""
        return ExecResult(sql, error=f"{type(error).__name__}: {error}{hint}", elapsed_s=elapsed)
    finally:
        connection.close()
    return ExecResult(sql, columns, tuple(tuple(row) for row in rows[:max_rows]),
                      truncated=len(rows) > max_rows, elapsed_s=time.monotonic() - start)  # fmt: skip


def _normal(value: Any) -> Any:
    """Values compared by meaning: floats rounded (1.0 == 1), bytes as hex."""
    if isinstance(value, float):
        rounded = round(value, 6)
        return int(rounded) if rounded.is_integer() else rounded
    if isinstance(value, bytes):
        return value.hex()
    return value


def normalized_rows(rows: Sequence[Sequence[Any]], ordered: bool = False) -> tuple[tuple[Any, ...], ...]:
    """Rows as comparable tuples; sorted (a multiset) unless ``ordered``. Column names never matter."""
    normal = [tuple(_normal(value) for value in row) for row in rows]
    return tuple(normal if ordered else sorted(normal, key=repr))


@dataclass(slots=True, frozen=True)
class Checks:
    """Unit tests on a result: column count, non-empty, row bound, equality with a reference result
    (``reference_rows``, compared as a multiset unless ``ordered``)."""

    columns: int | None = None
    non_empty: bool = False
    max_rows: int | None = None
    reference_rows: tuple[tuple[Any, ...], ...] | None = None
    ordered: bool = False

    def failures(self, result: ExecResult) -> list[str]:
        """Why ``result`` fails these checks (empty: it passes). A failed execution fails everything."""
        if not result.ok:
            return [f"execution failed: {result.error}"]
        found: list[str] = []
        if self.columns is not None and len(result.columns) != self.columns:
            found.append(f"expected {self.columns} column(s), got {len(result.columns)}")
        if self.non_empty and not result.rows:
            found.append("expected at least one row, got none")
        if self.max_rows is not None and len(result.rows) > self.max_rows:
            found.append(f"expected at most {self.max_rows} row(s), got {len(result.rows)}")
        if self.reference_rows is not None:
            if result.truncated:
                found.append("result truncated at the row cap: cannot equal the reference")
            elif normalized_rows(result.rows, self.ordered) != normalized_rows(self.reference_rows, self.ordered):
                found.append(f"result differs from the reference ({len(self.reference_rows)} row(s))")
        return found


def reference_checks(
    db_path: str | Path, reference_sql: str, timeout_s: float, max_rows: int, base: Checks | None = None
) -> Checks:
    """``base`` plus equality with the result of ``reference_sql`` (ordered when it has an ORDER BY).
    A reference that does not run is the caller's error: ConfigError naming ``reference_sql``."""
    result = execute_sql(db_path, reference_sql, timeout_s, max_rows)
    if not result.ok or result.truncated:
        reason = result.error or f"more than {max_rows} rows (the row cap)"
        raise ConfigError("reference_sql", f"the reference query must run: {reason}")
    base = base or Checks()
    ordered = re.search(r"\border\s+by\b", reference_sql, re.IGNORECASE) is not None
    return Checks(base.columns if base.columns is not None else len(result.columns), base.non_empty, base.max_rows,
                  result.rows, ordered)  # fmt: skip


def parse_llm_checks(text: str | None) -> Checks | None:
    """Checks from a model's JSON answer ``{"columns": int, "non_empty": bool, "max_rows": int}`` (any
    subset; the first JSON object in the text counts). None when there is no usable object."""
    for match in _JSON_OBJECT.finditer(text or ""):
        try:
            payload = json.loads(match.group(0))
        except ValueError:
            continue
        if not isinstance(payload, dict):
            continue
        columns, non_empty, max_rows = payload.get("columns"), payload.get("non_empty"), payload.get("max_rows")
        flag_ok = non_empty is None or isinstance(non_empty, bool)
        if not (_count_or_none(columns) and _count_or_none(max_rows) and flag_ok):
            continue
        if columns is None and max_rows is None and non_empty is None:
            continue
        return Checks(columns=columns, non_empty=bool(non_empty), max_rows=max_rows)
    return None


def _count_or_none(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)


def vote(results: Sequence[tuple[int, ExecResult]]) -> tuple[int, int] | None:
    """Majority vote on result sets: (index of the chosen candidate, its votes), or None for no input.

    Candidates whose rows are equal as multisets agree; the largest group wins, ties go to the group whose
    first member comes first, and the group's first member is returned.
    """
    groups: dict[tuple[tuple[Any, ...], ...], list[int]] = {}
    for index, result in results:
        groups.setdefault(normalized_rows(result.rows), []).append(index)
    if not groups:
        return None
    best = max(groups.values(), key=lambda members: (len(members), -min(members)))
    return min(best), len(best)


def sample_database_sql() -> str:
    """The shipped shop database script (customers, products, orders; 440 rows)."""
    return (resources.files("slosched.devtools") / "data" / "shop.sql").read_text(encoding="utf-8")


def create_sample_database(path: str | Path) -> Path:
    """Build the sample shop database at ``path`` (replacing a file there) and return the path."""
    target = Path(path)
    target.unlink(missing_ok=True)
    connection = sqlite3.connect(target)
    try:
        connection.executescript(sample_database_sql())
        connection.commit()
    finally:
        connection.close()
    return target


def describe_schema(db_path: str | Path) -> str:
    """The CREATE statements of the database's tables (what the prompts show the model)."""
    connection = sqlite3.connect(f"{Path(db_path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL ORDER BY name"
        ).fetchall()
    finally:
        connection.close()
    return "\n".join(f"{row[0]};" for row in rows)
