"""Azure 2023 and 2024 CSVs: datetime stamps (7 fractional digits), token columns, zero rows, errors."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from slosched.workloads.importers import import_trace
from tests.workloads.importers.helpers import SAMPLES, calls, check_jobs, write


def _rows(name: str) -> list[dict[str, str]]:
    with open(SAMPLES / name, encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


@pytest.mark.parametrize(
    ("fmt", "name", "kept"), [("azure", "azure_2023.csv", 12), ("azure2024", "azure_2024.csv", 11)]
)
def test_sample_becomes_jobs(tmp_path: Path, fmt: str, name: str, kept: int) -> None:
    result = import_trace(fmt, SAMPLES / name)
    assert result.rows_read == 12 and len(result.jobs) == kept and result.skipped_zero == 12 - kept
    check_jobs(result.jobs, fmt, tmp_path)
    rows = [r for r in _rows(name) if int(r["GeneratedTokens"]) > 0]
    assert calls(result.jobs) == [(int(r["ContextTokens"]), int(r["GeneratedTokens"])) for r in rows]
    assert all(job.template == fmt for job in result.jobs)


def test_seven_fractional_digits_are_kept(tmp_path: Path) -> None:
    text = (
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,10,2\n2023-11-16 18:17:03.9799601,5,1\n"
    )
    jobs = import_trace("azure", write(tmp_path, "t.csv", text)).jobs
    assert jobs[1].arrival_s == pytest.approx(1e-7, abs=5e-8)


def test_stamps_across_midnight_and_zones(tmp_path: Path) -> None:
    text = (
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2024-05-10 23:59:59.5000000+00:00,10,2\n"
        "2024-05-11 00:00:01.0000000Z,5,1\n"
    )
    jobs = import_trace("azure2024", write(tmp_path, "t.csv", text)).jobs
    assert [job.arrival_s for job in jobs] == pytest.approx([0.0, 1.5])


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("TIMESTAMP,ContextTokens\n2023-11-16 18:17:03,5\n", "line 1, column GeneratedTokens", "missing column"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,5,1\nyesterday,5,1\n",
            "line 3, column TIMESTAMP",
            "datetime",
        ),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,-5,1\n", "line 2, column ContextTokens", ">= 0"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,5,1.5\n",
            "line 2, column GeneratedTokens",
            "'1.5'",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,5\n",
            "line 2, column GeneratedTokens",
            "2 of 3",
        ),
    ],
)
def test_errors_name_file_line_and_column(tmp_path: Path, text: str, field: str, message: str) -> None:
    path = write(tmp_path, "bad.csv", text)
    with pytest.raises(ConfigError) as info:
        import_trace("azure", path)
    assert info.value.field == f"{path} {field}"
    assert message in str(info.value)


def test_a_huge_bad_cell_is_not_echoed(tmp_path: Path) -> None:
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03," + "9x" * 5000 + ",1\n"
    with pytest.raises(ConfigError) as info:
        import_trace("azure", write(tmp_path, "bad.csv", text))
    assert len(str(info.value)) < 300
