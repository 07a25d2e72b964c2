"""The SQLite side of the Text-to-SQL workflow runner: extracting SQL from model output, executing it
read-only with a timeout and a row cap, unit-test checks on results, and the majority vote.

Invariants: ``execute_sql`` never raises for bad SQL (every failure is an ``ExecResult`` with ``error``
set), never writes (read-only URI + ``PRAGMA query_only`` + an authorizer that allows reads only) and never
runs past ``timeout_s`` (a progress handler interrupts the statement) or returns more than ``max_rows`` rows
or ``max_result_bytes``; one value is at most ``max_value_bytes`` (SQLite's length limit) and SQLite's heap
at most ``HEAP_LIMIT_BYTES``, so a single huge allocation fails fast instead of outrunning the timeout.
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
MAX_VALUE_BYTES = 1_000_000  # SQLITE_LIMIT_LENGTH: the largest string or blob one value may be
MAX_RESULT_BYTES = 4_000_000  # stop fetching past this many bytes of values (the result is truncated)
HEAP_LIMIT_BYTES = 256 * 2**20  # SQLite's hard heap limit (process-wide, see _limit_heap)


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


_PRINTF_SPEC = re.compile(r"%(?:%|[-+ 0#,!]*(\*|\d*)(?:\.(\*|\d*))?[a-zA-Z]?)")


class _PrintfGuard:
    """``printf``/``format`` with widths and precisions capped: SQLite's own pads ``%.*c`` one character
    at a time inside one VM step, so ``printf('%.*c', 500000000, 'x')`` runs for seconds past any deadline
    even once its allocation fails. Checked calls run SQLite's printf on a private connection."""

    def __init__(self, max_value_bytes: int) -> None:
        self.max_value_bytes = max_value_bytes
        self.reason: str | None = None
        self._helper: sqlite3.Connection | None = None

    def __call__(self, *args: Any) -> Any:
        if not args or not isinstance(args[0], str):
            return None if not args else args[0]
        self._check(args)
        if self._helper is None:
            self._helper = sqlite3.connect(":memory:")
            self._helper.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.max_value_bytes)
        marks = ", ".join("?" * len(args))
        return self._helper.execute(f"SELECT printf({marks})", args).fetchone()[0]

    def _check(self, args: tuple[Any, ...]) -> None:
        position = 1
        for match in _PRINTF_SPEC.finditer(args[0]):
            if match.group(0) == "%%":
                continue
            for part in match.groups():
                value: Any = part
                if part == "*":
                    value = args[position] if position < len(args) else 0
                    position += 1
                try:
                    size = abs(int(value or 0))
                except (TypeError, ValueError):
                    size = 0
                if size > self.max_value_bytes:
                    self.reason = f"printf width or precision {size} is too big (at most {self.max_value_bytes})"
                    raise ValueError(self.reason)
            position += 1

    def close(self) -> None:
        if self._helper is not None:
            self._helper.close()


def _limit_heap() -> None:
    """SQLite's hard heap limit is process-wide and can only be lowered: set it once, never raising one a
    host application set lower."""
    with sqlite3.connect(":memory:") as probe:
        current = int(probe.execute("PRAGMA hard_heap_limit").fetchone()[0])
        if current == 0 or current > HEAP_LIMIT_BYTES:
            probe.execute(f"PRAGMA hard_heap_limit = {int(HEAP_LIMIT_BYTES)}")


def _open_read_only(
    db_path: str | Path, timeout_s: float, deadline: float, max_value_bytes: int, printf: _PrintfGuard
) -> sqlite3.Connection:
    _limit_heap()
    connection = sqlite3.connect(
        f"{Path(db_path).resolve().as_uri()}?mode=ro", uri=True, timeout=timeout_s, check_same_thread=False
    )
    # One value (randomblob, printf('%.*c'), zeroblob, a doubling recursive string) is a single VM step the
    # progress handler cannot interrupt: cap its size instead, so it fails at once.
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_value_bytes)
    connection.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, min(max_value_bytes, 1_000_000))
    for name in ("printf", "format"):
        connection.create_function(name, -1, printf, deterministic=True)
    connection.execute("PRAGMA query_only = ON")
    connection.set_authorizer(_authorize)
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_OPS)
    return connection


def _value_bytes(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes)) else 8


def _fetch(cursor: sqlite3.Cursor, max_rows: int, max_result_bytes: int) -> tuple[list[tuple[Any, ...]], bool]:
    """Rows until ``max_rows`` or ``max_result_bytes`` (values' sizes); True when more were left."""
    rows: list[tuple[Any, ...]] = []
    size = 0
    while len(rows) < max_rows:
        row = cursor.fetchone()
        if row is None:
            return rows, False
        size += sum(_value_bytes(value) for value in row)
        if size > max_result_bytes:
            return rows, True
        rows.append(tuple(row))
    return rows, cursor.fetchone() is not None


def execute_sql(
    db_path: str | Path,
    sql: str,
    timeout_s: float = 2.0,
    max_rows: int = 1000,
    *,
    max_value_bytes: int = MAX_VALUE_BYTES,
    max_result_bytes: int = MAX_RESULT_BYTES,
) -> ExecResult:
    """Run one statement on a read-only connection (see the module invariants). Blocking: call it from a
    worker thread in async code."""
    start = time.monotonic()
    deadline = start + timeout_s
    printf = _PrintfGuard(max_value_bytes)
    try:
        connection = _open_read_only(db_path, timeout_s, deadline, max_value_bytes, printf)
    except sqlite3.Error as error:
        return ExecResult(sql, error=f"cannot open database: {error}", elapsed_s=time.monotonic() - start)
    try:
        cursor = connection.execute(sql)
        rows, truncated = _fetch(cursor, max_rows, max_result_bytes)
        columns = tuple(str(column[0]) for column in cursor.description or ())
    except (sqlite3.Error, sqlite3.Warning, MemoryError) as error:  # 3.11 reports two statements as a Warning
        elapsed = time.monotonic() - start
        text = str(error)
        if time.monotonic() > deadline and "interrupt" in text:
            return ExecResult(sql, error=f"query timed out after {timeout_s:g} s", timed_out=True, elapsed_s=elapsed)
        if printf.reason is not None:
            text = printf.reason
        if "too big" in text:
            text += f" (one value may hold at most {max_value_bytes} bytes)"
        elif "out of memory" in text or isinstance(error, MemoryError):
            text = f"out of memory (queries may use at most {HEAP_LIMIT_BYTES // 2**20} MiB)"
        hint = " (read-only: a single SELECT query only)" if "not authorized" in text else ""
        return ExecResult(sql, error=f"{type(error).__name__}: {text}{hint}", elapsed_s=elapsed)
    finally:
        connection.close()
        printf.close()
    return ExecResult(sql, columns, tuple(rows), truncated=truncated, elapsed_s=time.monotonic() - start)


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
    return Checks(
        base.columns if base.columns is not None else len(result.columns),
        base.non_empty,
        base.max_rows,
        result.rows,
        ordered,
    )


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
