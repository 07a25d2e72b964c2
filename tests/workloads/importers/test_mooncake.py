"""Mooncake JSONL: milliseconds, token columns, hash_ids as exact shared-prefix keys, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from slosched.workloads.importers import import_trace
from slosched.workloads.importers.mooncake import BLOCK_TOKENS
from tests.workloads.importers.helpers import SAMPLES, calls, check_jobs, write


def test_sample_becomes_jobs(tmp_path: Path) -> None:
    result = import_trace("mooncake", SAMPLES / "mooncake.jsonl")
    assert (result.rows_read, len(result.jobs)) == (12, 12)
    check_jobs(result.jobs, "mooncake", tmp_path)
    records = [json.loads(line) for line in (SAMPLES / "mooncake.jsonl").read_text().splitlines()]
    assert calls(result.jobs) == [(r["input_length"], r["output_length"]) for r in records]
    start = records[0]["timestamp"]
    assert [job.arrival_s for job in result.jobs] == pytest.approx([(r["timestamp"] - start) / 1000 for r in records])
    # Every request shares at least block 0 (the sample's system prompt) with another one.
    assert all(job.stages[0].calls[0].prefix_tokens >= BLOCK_TOKENS for job in result.jobs)


def _line(stamp: int, blocks: list[int], tokens: int = 2000) -> str:
    return json.dumps({"timestamp": stamp, "input_length": tokens, "output_length": 5, "hash_ids": blocks})


def test_prefix_keys_only_claim_real_reuse(tmp_path: Path) -> None:
    lines = [_line(0, [1, 2, 3]), _line(10, [1, 2, 4]), _line(20, [1, 2, 3, 5]), _line(30, [9]), _line(40, [1, 7], 300)]
    jobs = import_trace("mooncake", write(tmp_path, "m.jsonl", "\n".join(lines))).jobs
    prefixes = [(job.stages[0].calls[0].prefix_key, job.stages[0].calls[0].prefix_tokens) for job in jobs]
    a, b, c, d, e = prefixes
    assert a == c and a[1] == 3 * BLOCK_TOKENS  # [1,2,3] shared exactly by the first and third
    assert b[1] == 2 * BLOCK_TOKENS and b[0] != a[0]  # [1,2] only: a different key, never the 3-block one
    assert d == (None, 0)  # shares nothing
    assert e[1] == 300 and e[0] not in {a[0], b[0]}  # 1 block, capped at the 300-token prompt


@pytest.mark.parametrize(
    ("line", "column", "message"),
    [
        ('{"timestamp": 1, "input_length": 5}', "output_length", "missing"),
        ('{"timestamp": "1", "input_length": 5, "output_length": 1}', "timestamp", "number"),
        ('{"timestamp": 1, "input_length": 5.5, "output_length": 1}', "input_length", "integer"),
        ('{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": "x"}', "hash_ids", "list"),
        ('{"timestamp": 1, "input_length": 5', "35", "bad JSON"),
    ],
)
def test_errors_name_line_and_field(tmp_path: Path, line: str, column: str, message: str) -> None:
    path = write(tmp_path, "m.jsonl", _line(0, [1]) + "\n\n" + line + "\n")
    with pytest.raises(ConfigError) as info:
        import_trace("mooncake", path)
    assert info.value.field == f"{path} line 3, column {column}"
    assert message in str(info.value)
