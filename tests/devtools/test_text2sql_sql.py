"""SQL extraction from model output, read-only SQLite execution with timeout and row cap, checks, vote."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from slosched.devtools.text2sql_sql import (
    Checks,
    ExecResult,
    create_sample_database,
    describe_schema,
    execute_sql,
    extract_sql,
    parse_llm_checks,
    reference_checks,
    vote,
)


@pytest.fixture(scope="module")
def shop_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_sample_database(tmp_path_factory.mktemp("sql") / "shop.db")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("```sql\nSELECT a FROM t;\n```", "SELECT a FROM t"),
        ("Here:\n```\nselect a\nfrom t\n```\nDone.", "select a\nfrom t"),
        ("```python\nprint(1)\n```\n```sql\nSELECT 1\n```", "SELECT 1"),  # the sql-tagged fence wins
        ("A query with a join: SELECT x FROM t; it works", "SELECT x FROM t"),  # "with" in prose is no CTE
        ("I will select the names.\nSELECT name FROM c\n\nThis lists them.", "SELECT name FROM c"),
        ("WITH b AS (SELECT * FROM t) SELECT COUNT(*) FROM b;", "WITH b AS (SELECT * FROM t) SELECT COUNT(*) FROM b"),
        ("SELECT 'a;b', \"c;d\" FROM t; more", "SELECT 'a;b', \"c;d\" FROM t"),
        ("SELECT a -- don't stop; here\nFROM t;", "SELECT a -- don't stop; here\nFROM t"),
        ("```sql\nSELECT a FROM t", "SELECT a FROM t"),  # an unclosed fence (output cut by max_tokens)
        ("```sql\nSELEC a FROM t;\n```", "SELEC a FROM t"),  # a tagged block is the model's SQL, typo or not
        ("```\nSELEC a FROM t\n```", None),
        ("I don't know", None),
        ("", None),
        (None, None),
        ("DROP TABLE t;", None),
    ],
)
def test_extract_sql(text: str | None, expected: str | None) -> None:
    assert extract_sql(text) == expected


def test_execute_sql_reads_only_and_bounds_time_and_rows(shop_db: Path, tmp_path: Path) -> None:
    counted = execute_sql(shop_db, "SELECT COUNT(*) AS n FROM orders")
    assert counted.ok and counted.columns == ("n",) and counted.rows == ((400,),)
    for statement in (
        "DELETE FROM orders",
        "DROP TABLE orders",
        f"ATTACH DATABASE '{tmp_path / 'x.db'}' AS x",
        "PRAGMA query_only = OFF",
    ):
        denied = execute_sql(shop_db, statement)
        assert not denied.ok and "not authorized" in (denied.error or "") and "read-only" in (denied.error or "")
    assert not (tmp_path / "x.db").exists()
    assert sqlite3.connect(shop_db).execute("SELECT COUNT(*) FROM orders").fetchone() == (400,)
    endless = execute_sql(
        shop_db, "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT SUM(n) FROM r", timeout_s=0.1
    )
    assert endless.timed_out and endless.error == "query timed out after 0.1 s" and endless.elapsed_s < 1.0
    capped = execute_sql(shop_db, "SELECT * FROM orders", max_rows=7)
    assert capped.ok and capped.truncated and len(capped.rows) == 7
    assert "syntax error" in (execute_sql(shop_db, "SELEC 1").error or "")
    assert "one statement" in (execute_sql(shop_db, "SELECT 1; SELECT 2").error or "")
    assert "cannot open" in (execute_sql(tmp_path / "none.db", "SELECT 1").error or "")


def test_sample_database_and_schema(shop_db: Path) -> None:
    schema = describe_schema(shop_db)
    assert schema.count("CREATE TABLE") == 3 and "order_date" in schema
    rows = execute_sql(shop_db, "SELECT (SELECT COUNT(*) FROM customers), (SELECT COUNT(*) FROM products)").rows
    assert rows == ((24, 16),)


def test_checks_compare_results_as_multisets_unless_ordered(shop_db: Path) -> None:
    result = ExecResult("q", ("a", "b"), ((2, 1.0), (1, "x")))
    assert Checks(columns=2, non_empty=True, max_rows=2, reference_rows=((1, "x"), (2, 1))).failures(result) == []
    assert Checks(reference_rows=((1, "x"), (2, 1)), ordered=True).failures(result) != []
    failures = Checks(columns=3, max_rows=1, reference_rows=((2, 1),)).failures(result)
    assert len(failures) == 3 and "3 column" in failures[0]
    assert Checks(non_empty=True).failures(ExecResult("q", ("a",), ())) == ["expected at least one row, got none"]
    assert Checks().failures(ExecResult("q", error="boom"))[0].startswith("execution failed")
    ordered = reference_checks(shop_db, "SELECT id FROM products ORDER BY price DESC LIMIT 3", 1.0, 100)
    assert ordered.ordered and ordered.columns == 1 and ordered.reference_rows == ((13,), (4,), (11,))
    with pytest.raises(ConfigError, match="reference_sql"):
        reference_checks(shop_db, "SELECT * FROM orders", 1.0, 10)  # over the row cap


def test_vote_majority_ties_by_order_and_parse_llm_checks() -> None:
    one, two = ExecResult("a", ("x",), ((1,),)), ExecResult("b", ("y",), ((2,),))
    assert vote([(0, one), (1, two), (2, ExecResult("c", ("z",), ((2.0,),)))]) == (1, 2)
    assert vote([(3, two), (1, one)]) == (1, 1)  # a tie: the lower candidate index wins
    assert vote([]) is None
    assert parse_llm_checks('Sure: {"columns": 2, "non_empty": true}') == Checks(columns=2, non_empty=True)
    assert parse_llm_checks('{"x": 1} then {"max_rows": 5}') == Checks(max_rows=5)
    for bad in ("no json", '{"columns": 0}', '{"columns": true}', '{"non_empty": 1}', "{}", "{broken"):
        assert parse_llm_checks(bad) is None
