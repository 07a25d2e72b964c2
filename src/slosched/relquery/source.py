"""Table sources for relQueries, queried with DuckDB: CSV, Parquet and SQLite files.

``FILE[:TABLE]`` names a source; the format comes from the suffix (``.csv``/``.tsv``/``.txt``,
``.parquet``/``.pq``, ``.db``/``.sqlite``/``.sqlite3``) or, failing that, the file's magic bytes. CSV and
Parquet files are one table each (DuckDB reads them directly); a SQLite file holds several, so ``TABLE``
picks one (optional when the file has exactly one). SQLite tables are read with Python's ``sqlite3`` and
handed to DuckDB as columns, because DuckDB's own SQLite extension is downloaded on first use and this
must work offline. The optional ``where`` filter (``relquery/where.py``) is parsed and rebuilt over the
source's columns, and DuckDB runs locked: no file but the source, no extension, no config change.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.relquery.where import compile_where

_CSV = (".csv", ".tsv", ".txt")
_PARQUET = (".parquet", ".pq")
_SQLITE = (".db", ".sqlite", ".sqlite3")
FORMATS = ("csv", "parquet", "sqlite")


@dataclass(frozen=True, slots=True)
class TableRef:
    """A file and, for SQLite, the table inside it."""

    path: Path
    table: str | None = None

    @classmethod
    def parse(cls, text: str) -> TableRef:
        """``FILE`` or ``FILE:TABLE``; a path that exists as written is never split at a colon."""
        if not text:
            raise ConfigError("table", "expected FILE or FILE:TABLE")
        if Path(text).exists():
            return cls(Path(text))
        head, colon, tail = text.rpartition(":")
        if colon and head and tail and "/" not in tail and "\\" not in tail:
            return cls(Path(head), tail)
        return cls(Path(text))

    def __str__(self) -> str:
        return f"{self.path}:{self.table}" if self.table else str(self.path)


@dataclass(frozen=True, slots=True)
class TableRows:
    """Selected columns of the rows that passed the filter, in the source's order."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def detect_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in _CSV:
        return "csv"
    if suffix in _PARQUET:
        return "parquet"
    if suffix in _SQLITE:
        return "sqlite"
    with path.open("rb") as stream:
        magic = stream.read(16)
    if magic.startswith(b"SQLite format 3"):
        return "sqlite"
    if magic.startswith(b"PAR1"):
        return "parquet"
    raise ConfigError(
        "table", f"cannot tell the format of {str(path)!r}; use a suffix for one of: {', '.join(FORMATS)}"
    )


def read_rows(ref: TableRef, columns: Sequence[str], where: str | None = None, limit: int | None = None) -> TableRows:
    """The ``columns`` of every row of ``ref`` matching ``where`` (at most ``limit`` rows).

    Fails with ``ConfigError`` on a missing file, an unknown format or table, a column the table lacks
    (the message lists the table's columns) or a ``where`` clause DuckDB rejects.
    """
    if not ref.path.is_file():
        raise ConfigError("table", f"no such file: {str(ref.path)!r}")
    if limit is not None and limit < 1:
        raise ConfigError("max_rows", f"must be >= 1, got {limit}")
    con = locked_connection(ref.path)
    try:
        available = _open_source(con, ref)
        missing = [column for column in columns if column not in available]
        if missing:
            raise ConfigError(
                "template", f"column(s) {missing} not in table {str(ref)!r}; available: {', '.join(available)}"
            )
        selected = ", ".join(_quote(column) for column in columns)
        sql = f"SELECT {selected} FROM src"
        params: tuple[Any, ...] = ()
        if where:
            clause = compile_where(where, available)
            sql += f" WHERE {clause.sql}"
            params = clause.params
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        try:
            rows = con.execute(sql, list(params)).fetchall()
        except duckdb.Error as error:
            raise ConfigError("--where", f"DuckDB rejected the filter: {str(error)[:200]}") from None
        return TableRows(tuple(columns), rows)
    finally:
        con.close()


def locked_connection(path: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB that may read ``path`` and no other file, write none, load no extension, and
    cannot change that (defence in depth: ``--where`` is already parsed, never run as text)."""
    con = duckdb.connect()
    try:
        con.execute("SET allowed_paths = ?", [[str(path.resolve())]])
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def _open_source(con: duckdb.DuckDBPyConnection, ref: TableRef) -> list[str]:
    """Make the source visible as view ``src``; returns its column names."""
    kind = detect_format(ref.path)
    if kind != "sqlite" and ref.table is not None:
        raise ConfigError("table", f"a {kind} file is one table; drop ':{ref.table}' from {str(ref)!r}")
    path = str(ref.path.resolve())  # the one path the locked connection may read
    try:
        if kind == "csv":
            con.read_csv(path).create_view("src")
        elif kind == "parquet":
            con.read_parquet(path).create_view("src")
        else:
            _register_sqlite(con, ref)
    except duckdb.Error as error:
        raise ConfigError("table", f"DuckDB cannot read {path!r} as {kind}: {error}") from None
    return [row[0] for row in con.execute("DESCRIBE src").fetchall()]


def sqlite_tables(path: Path) -> list[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name")
        return [row[0] for row in rows]


def _register_sqlite(con: duckdb.DuckDBPyConnection, ref: TableRef) -> None:
    try:
        tables = sqlite_tables(ref.path)
    except sqlite3.DatabaseError as error:
        raise ConfigError("table", f"{str(ref.path)!r} is not a readable SQLite file: {error}") from None
    table = ref.table
    if table is None:
        if len(tables) != 1:
            raise ConfigError("table", f"{str(ref.path)!r} has tables {tables}; name one as FILE:TABLE")
        table = tables[0]
    if table not in tables:
        raise UnknownNameError(f"table in {ref.path.name}", table, tables)
    with sqlite3.connect(f"file:{ref.path}?mode=ro", uri=True) as db:
        cursor = db.execute(f"SELECT * FROM {_quote(table)}")
        names = [description[0] for description in cursor.description]
        rows = cursor.fetchall()
    # Object arrays let DuckDB infer each column's type (and keep NULLs); a column SQLite stored with
    # mixed types falls back to text.
    data: dict[str, np.ndarray] = {}
    for index, name in enumerate(names):
        values = [row[index] for row in rows]
        kinds = {type(value) for value in values if value is not None}
        if len(kinds - {int, float}) > 0 and len(kinds) > 1:
            values = [None if value is None else str(value) for value in values]
        data[name] = np.array(values, dtype=object)
    if not rows:
        data = {name: np.array([], dtype=object) for name in names}
    con.register("src", data)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
