"""The Text-to-SQL runner's SQLite execution is bounded in memory, result size and time: statements that
would allocate hundreds of MB in one step, or run forever, end fast with a clear error."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from slosched.devtools.text2sql_sql import create_sample_database, execute_sql


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_sample_database(tmp_path_factory.mktemp("t2s") / "sample.sqlite")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT randomblob(500000000)",
        "SELECT printf('%.*c', 500000000, 'x')",
        "SELECT zeroblob(500000000)",
        "SELECT length(replace(hex(zeroblob(1000)), '0', hex(zeroblob(100000))))",
        "WITH RECURSIVE c(s) AS (SELECT 'x' UNION ALL SELECT s || s FROM c) SELECT length(s) FROM c",
    ],
)
def test_one_huge_value_fails_fast_naming_the_cap(db: Path, sql: str) -> None:
    started = time.monotonic()
    result = execute_sql(db, sql, timeout_s=5.0)
    assert time.monotonic() - started < 1.0
    assert not result.ok and result.error is not None
    assert "too big" in result.error and "at most 1000000 bytes" in result.error


def test_a_long_recursive_cte_is_interrupted_at_the_deadline(db: Path) -> None:
    sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    started = time.monotonic()
    result = execute_sql(db, sql, timeout_s=0.3)
    assert time.monotonic() - started < 1.0
    assert result.timed_out and result.error == "query timed out after 0.3 s"


def test_an_endless_row_stream_stops_at_the_row_cap(db: Path) -> None:
    sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"
    result = execute_sql(db, sql, timeout_s=5.0, max_rows=50)
    assert result.ok and result.truncated and len(result.rows) == 50


def test_results_stop_at_the_byte_cap(db: Path) -> None:
    sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT hex(randomblob(50000)) FROM c"
    started = time.monotonic()
    result = execute_sql(db, sql, timeout_s=5.0, max_rows=1000, max_result_bytes=1_000_000)
    assert time.monotonic() - started < 1.0
    assert result.ok and result.truncated
    assert len(result.rows) == 10  # 100,000 hex characters a row


def test_a_sort_past_the_heap_limit_is_out_of_memory_not_a_crash(db: Path) -> None:
    sql = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 400) "
        "SELECT group_concat(hex(randomblob(400000))) FROM c"
    )
    result = execute_sql(db, sql, timeout_s=5.0)
    assert not result.ok and result.error is not None
    assert "too big" in result.error or "out of memory" in result.error


def test_ordinary_queries_still_run(db: Path) -> None:
    result = execute_sql(db, "SELECT 1 + 1, 'a' || 'b', printf('%.2f|%5d|%s|%%', 3.14159, 42, 'x')")
    assert result.ok and result.rows == ((2, "ab", "3.14|   42|x|%"),) and not result.truncated
