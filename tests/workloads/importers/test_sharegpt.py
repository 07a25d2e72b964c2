"""ShareGPT JSON: 4 chars per token, replies as calls of one session, deterministic arrivals, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from slosched.workloads.importers import import_trace
from slosched.workloads.importers.sharegpt import THINK_TIME_S, estimate_tokens
from tests.workloads.importers.helpers import SAMPLES, check_jobs, write


def test_estimate_tokens() -> None:
    assert [estimate_tokens(text) for text in ("", "abc", "abcd", "abcde", "x" * 400)] == [1, 1, 1, 2, 100]


def test_sample_becomes_sessions(tmp_path: Path) -> None:
    result = import_trace("sharegpt", SAMPLES / "sharegpt.json")
    assert len(result.jobs) == result.rows_read == 10
    check_jobs(result.jobs, "sharegpt", tmp_path)
    by_session: dict[str, list] = {}
    for job in result.jobs:
        call = job.stages[0].calls[0]
        assert call.session_id is not None
        by_session.setdefault(call.session_id, []).append((job.arrival_s, call))
    assert {name: len(turns) for name, turns in by_session.items()} == {
        "sharegpt/c1": 2,
        "sharegpt/c2": 3,
        "sharegpt/c3": 1,
        "sharegpt/c4": 2,
        "sharegpt/c6": 2,
    }
    for turns in by_session.values():
        (start, first), *later = turns
        assert first.prefix_key is None and first.prefix_tokens == 0
        previous = first
        for number, (arrival, call) in enumerate(later, start=1):
            assert arrival == pytest.approx(start + number * THINK_TIME_S)
            assert call.prefix_key == call.session_id
            assert call.prefix_tokens == previous.input_tokens + previous.output_tokens < call.input_tokens
            previous = call


def test_token_counts_follow_the_text(tmp_path: Path) -> None:
    data = [
        {
            "id": "x",
            "conversations": [
                {"from": "system", "value": "s" * 40},
                {"from": "human", "value": "h" * 81},
                {"from": "gpt", "value": "g" * 8},
            ],
        }
    ]
    jobs = import_trace("sharegpt", write(tmp_path, "s.json", json.dumps(data))).jobs
    call = jobs[0].stages[0].calls[0]
    assert (call.input_tokens, call.output_tokens) == (10 + 21, 2)


def test_deterministic(tmp_path: Path) -> None:
    first = import_trace("sharegpt", SAMPLES / "sharegpt.json").jobs
    assert import_trace("sharegpt", SAMPLES / "sharegpt.json").jobs == first


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('[{"id": "a", "conversations": [{"from": "human"}]}]', "conversation 0, field conversations[0].value"),
        ('[{"id": "a", "conversations": []}, {"id": "b"}]', "conversation 1, field conversations"),
        ('[{"id": "a", "conversations": [{"from": 3, "value": "x"}]}]', "conversation 0, field conversations[0].from"),
        ('{"id": "a"}', "line 1"),
        ('[\n  {"id": "a",,}\n]', "line 2, column 14"),
    ],
)
def test_errors_name_the_place(tmp_path: Path, text: str, field: str) -> None:
    path = write(tmp_path, "s.json", text)
    with pytest.raises(ConfigError) as info:
        import_trace("sharegpt", path)
    assert info.value.field == f"{path} {field}"
