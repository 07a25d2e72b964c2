"""Vidur CSV: arrived_at, num_prefill_tokens, num_decode_tokens; extra columns ignored."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from slosched.workloads.importers import import_trace
from tests.workloads.importers.helpers import SAMPLES, calls, check_jobs, write


def test_sample_becomes_jobs(tmp_path: Path) -> None:
    result = import_trace("vidur", SAMPLES / "vidur.csv")
    assert (result.rows_read, len(result.jobs), result.skipped_zero) == (12, 12, 0)
    check_jobs(result.jobs, "vidur", tmp_path)
    with open(SAMPLES / "vidur.csv", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    assert calls(result.jobs) == [(int(r["num_prefill_tokens"]), int(r["num_decode_tokens"])) for r in rows]
    first = float(rows[0]["arrived_at"])
    expected = [float(r["arrived_at"]) - first for r in rows]
    assert [job.arrival_s for job in result.jobs] == pytest.approx(expected)


def test_integral_floats_are_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,128.0,16\n")
    assert calls(import_trace("vidur", path).jobs) == [(128, 16)]


def test_bad_time(tmp_path: Path) -> None:
    path = write(tmp_path, "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,1,1\nnan,1,1\n")
    with pytest.raises(ConfigError) as info:
        import_trace("vidur", path)
    assert info.value.field == f"{path} line 3, column arrived_at"
