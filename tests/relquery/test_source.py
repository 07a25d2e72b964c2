"""DuckDB table sources: CSV, Parquet, SQLite (and the bundled movies.db when installed)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import pytest

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.relquery.source import TableRef, read_rows

ROWS = [(1, "Heat", 1995), (2, "Up", 2009), (3, "Her", None)]


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Path:
    path = tmp_path / "films.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE films (id INTEGER, title TEXT, year INTEGER)")
        db.execute("CREATE TABLE empty (id INTEGER)")
        db.executemany("INSERT INTO films VALUES (?, ?, ?)", ROWS)
    return path


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    path = tmp_path / "films.csv"
    path.write_text("id,title,year\n1,Heat,1995\n2,Up,2009\n3,Her,\n", encoding="utf-8")
    return path


@pytest.fixture
def parquet_file(tmp_path: Path, csv_file: Path) -> Path:
    path = tmp_path / "films.parquet"
    con = duckdb.connect()
    con.read_csv(str(csv_file)).write_parquet(str(path))
    con.close()
    return path


@pytest.mark.parametrize("kind", ["csv", "parquet", "sqlite"])
def test_every_format_gives_the_same_rows(kind: str, csv_file: Path, parquet_file: Path, sqlite_file: Path) -> None:
    ref = {"csv": str(csv_file), "parquet": str(parquet_file), "sqlite": f"{sqlite_file}:films"}[kind]
    rows = read_rows(TableRef.parse(ref), ["title", "year"])
    assert rows.rows == [("Heat", 1995), ("Up", 2009), ("Her", None)]
    filtered = read_rows(TableRef.parse(ref), ["title"], where="year > 2000")
    assert filtered.records() == [{"title": "Up"}]


def test_limit_and_table_parsing(sqlite_file: Path) -> None:
    ref = TableRef.parse(f"{sqlite_file}:films")
    assert (ref.path, ref.table) == (sqlite_file, "films")
    assert len(read_rows(ref, ["id"], limit=2).rows) == 2
    assert TableRef.parse(str(sqlite_file)).table is None


def test_clear_errors(tmp_path: Path, csv_file: Path, sqlite_file: Path) -> None:
    with pytest.raises(ConfigError, match="available: id, title, year"):
        read_rows(TableRef.parse(str(csv_file)), ["plot"])
    with pytest.raises(ConfigError, match="no such file"):
        read_rows(TableRef.parse(str(tmp_path / "nope.csv")), ["id"])
    with pytest.raises(UnknownNameError):
        read_rows(TableRef.parse(f"{sqlite_file}:missing"), ["id"])
    with pytest.raises(ConfigError, match="name one as FILE:TABLE"):
        read_rows(TableRef.parse(str(sqlite_file)), ["id"])
    with pytest.raises(ConfigError, match="where"):
        read_rows(TableRef.parse(str(csv_file)), ["id"], where="year >>> 3")
    with pytest.raises(ConfigError, match="one table"):
        read_rows(TableRef(csv_file, "films"), ["id"])
    assert read_rows(TableRef.parse(f"{sqlite_file}:empty"), ["id"]).rows == []


def test_bundled_movies_db() -> None:
    sampledata = pytest.importorskip("bokeh_sampledata", reason="bokeh-sampledata (dev extra) not installed")
    path = Path(sampledata.__file__).parent / "_data" / "movies.db"
    if not path.exists():
        pytest.skip("this bokeh-sampledata version ships no movies.db")
    rows = read_rows(TableRef(path, "omdb"), ["Title", "Year"], where="Year = 2010", limit=50)
    assert 0 < len(rows.rows) <= 50 and all(year == 2010 for _, year in rows.rows)
