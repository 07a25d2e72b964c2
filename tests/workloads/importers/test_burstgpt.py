"""BurstGPT CSV: templates per model, tenants per log type, failed requests dropped, errors."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from slosched.workloads.importers import import_trace
from tests.workloads.importers.helpers import SAMPLES, calls, check_jobs, write


def test_sample_becomes_jobs(tmp_path: Path) -> None:
    result = import_trace("burstgpt", SAMPLES / "burstgpt.csv")
    assert (result.rows_read, len(result.jobs), result.skipped_zero) == (12, 11, 1)
    check_jobs(result.jobs, "burstgpt", tmp_path)
    with open(SAMPLES / "burstgpt.csv", encoding="utf-8") as stream:
        rows = [row for row in csv.DictReader(stream) if row["Response tokens"] != "0"]
    rows.sort(key=lambda row: float(row["Timestamp"]))
    assert calls(result.jobs) == [(int(r["Request tokens"]), int(r["Response tokens"])) for r in rows]
    assert [job.template for job in result.jobs] == [f"burstgpt/{r['Model']}" for r in rows]
    tenants = {"Conversation log": "conversation", "API log": "api"}
    assert [job.tenant for job in result.jobs] == [tenants[r["Log Type"]] for r in rows]
    assert {job.template for job in result.jobs} == {"burstgpt/ChatGPT", "burstgpt/GPT-4"}


def test_unsorted_timestamps_are_sorted_stably(tmp_path: Path) -> None:
    header = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    text = header + "5,ChatGPT,10,1,11,API log\n2,ChatGPT,20,2,22,API log\n5,GPT-4,30,3,33,API log\n"
    jobs = import_trace("burstgpt", write(tmp_path, "b.csv", text)).jobs
    assert [job.arrival_s for job in jobs] == [0.0, 3.0, 3.0]
    assert calls(jobs) == [(20, 2), (10, 1), (30, 3)]


@pytest.mark.parametrize(
    ("row", "column"),
    [("x,ChatGPT,10,1,11,API log", "Timestamp"), ("1,ChatGPT,ten,1,11,API log", "Request tokens")],
)
def test_bad_cells_name_line_and_column(tmp_path: Path, row: str, column: str) -> None:
    header = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    path = write(tmp_path, "b.csv", header + "1,ChatGPT,10,1,11,API log\n" + row + "\n")
    with pytest.raises(ConfigError) as info:
        import_trace("burstgpt", path)
    assert info.value.field == f"{path} line 3, column {column}"


def test_missing_column(tmp_path: Path) -> None:
    path = write(tmp_path, "b.csv", "Timestamp,Model,Request tokens,Response tokens\n1,ChatGPT,10,1\n")
    with pytest.raises(ConfigError, match="column Log Type: missing column"):
        import_trace("burstgpt", path)
