"""``--where`` is a parsed filter over the table's columns: what it accepts, and injection attempts that
must fail with an error naming ``--where`` (never reaching DuckDB as SQL text)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.relquery.source import TableRef, locked_connection, read_rows
from slosched.relquery.where import compile_where

COLUMNS = ["id", "title", "year", "score", "two words"]


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    path = tmp_path / "movies.csv"
    lines = ["id,title,year,score"] + [f"{i},Movie {i},{1990 + i},{i / 10}" for i in range(20)]
    path.write_text("\n".join(lines) + "\n")
    return path


def ids(path: Path, where: str) -> list[int]:
    return [row[0] for row in read_rows(TableRef(path), ["id"], where=where).rows]


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("year > 2005", list(range(16, 20))),
        ("year >= 2005 AND score < 1.7", [15, 16]),
        ("id = 1 OR id == 3", [1, 3]),
        ("NOT (id <> 2)", [2]),
        ("id IN (1, 2, 30)", [1, 2]),
        ("id NOT IN (1, 2) AND id < 4", [0, 3]),
        ("id BETWEEN 3 AND 5", [3, 4, 5]),
        ("id NOT BETWEEN 1 AND 18", [0, 19]),
        ("title LIKE 'Movie 1_'", list(range(10, 20))),
        ("title ILIKE 'movie 7'", [7]),
        ("title = 'Movie 4' or title = 'it''s'", [4]),
        ('"id" = -0 AND title IS NOT NULL', [0]),
        ("score > .15e1", [16, 17, 18, 19]),
    ],
)
def test_filters_select_the_expected_rows(csv_file: Path, where: str, expected: list[int]) -> None:
    assert ids(csv_file, where) == expected


@pytest.mark.parametrize(
    ("where", "why"),
    [
        ("id IN (SELECT * FROM read_csv('/etc/passwd'))", "unexpected '\\*'"),
        ("id IN (SELECT 1)", "expected a column or a literal at character 8, found 'SELECT'"),
        ("read_csv('/etc/passwd') IS NOT NULL", "function calls are not allowed"),
        ("length(title) > 3", "function calls are not allowed"),
        ("1=1; COPY src TO '/tmp/x.csv'", "';'"),
        ("1=1; ATTACH '/tmp/x.db' AS x", "';'"),
        ("id = 1 -- comment", "unexpected text after the filter"),
        ("id = 1 /* c */", "'/'"),
        ("title = $$x$$", "'\\$'"),
        ("COPY", "unknown column 'COPY'"),
        ("password = 'x'", "unknown column 'password'"),
        ("id = (SELECT 1)", "expected a column or a literal at character 6, found '\\('"),
        ("id + 1 > 2", "'\\+'"),
        ("title LIKE title", "LIKE takes a 'quoted pattern'"),
        ("id = 1 id = 2", "unexpected text after the filter"),
        ("", "is empty"),
        ("(" * 40 + "id = 1" + ")" * 40, "nested deeper"),
        ("id = 'x", "unexpected"),
    ],
)
def test_anything_else_is_refused_naming_where_and_what_is_allowed(where: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as raised:
        compile_where(where, COLUMNS)
    assert raised.value.field == "--where"
    assert "allowed:" in str(raised.value) or "characters" in str(raised.value)


def test_literals_are_bound_never_spliced() -> None:
    clause = compile_where("title = 'x'' OR 1=1 --' AND \"two words\" > 3", COLUMNS)
    assert clause.sql == '(("title" = ?) AND ("two words" > ?))'
    assert clause.params == ("x' OR 1=1 --", 3)


def test_a_long_filter_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError, match="at most 4096 characters") as raised:
        compile_where("id = 1 OR " * 1000 + "id = 2", COLUMNS)
    assert len(str(raised.value)) < 200


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_any_text_compiles_to_columns_placeholders_and_keywords_or_a_config_error(text: str) -> None:
    try:
        clause = compile_where(text, COLUMNS)
    except ConfigError as error:
        assert error.field == "--where"
        return
    stripped = clause.sql
    for column in COLUMNS:
        stripped = stripped.replace(f'"{column}"', "")
    for word in ("NOT", "AND", "OR", "IN", "BETWEEN", "ILIKE", "LIKE", "IS", "NULL", "TRUE", "FALSE"):
        stripped = stripped.replace(word, "")
    assert set(stripped) <= set("()?,=<>! -")


def test_duckdb_runs_locked_even_for_sql_that_bypassed_the_parser(csv_file: Path, tmp_path: Path) -> None:
    import duckdb

    con = locked_connection(csv_file)
    try:
        con.read_csv(str(csv_file.resolve())).create_view("src")
        assert con.execute("SELECT count(*) FROM src").fetchone() == (20,)
        for sql in (
            "SELECT * FROM read_csv('/etc/passwd')",
            f"COPY src TO '{tmp_path / 'out.csv'}'",
            f"ATTACH '{tmp_path / 'x.db'}' AS x",
            "SET enable_external_access = true",
            "INSTALL httpfs",
        ):
            with pytest.raises(duckdb.Error):
                con.execute(sql)
    finally:
        con.close()
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "x.db").exists()


def test_the_cli_answers_a_bad_where_with_one_error_line(csv_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from slosched.cli.main import run

    code = run(
        [
            "relquery",
            "--table",
            str(csv_file),
            "--template",
            "T: {title}",
            "--max-tokens",
            "4",
            "--where",
            "id IN (SELECT 1 FROM read_csv('/etc/passwd'))",
        ],
    )
    assert code == 2
    output = capsys.readouterr()
    assert "error: --where:" in output.err + output.out and "Traceback" not in output.err
