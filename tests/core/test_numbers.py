"""Specs hold plain Python numbers whatever they were built from; a non-integral token count is an error."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.core.numbers import as_float, as_int


def test_numpy_numbers_become_plain() -> None:
    call = CallSpec(np.int64(300), np.int32(20), np.int64(64), prefix_tokens=np.uint16(16))
    assert (type(call.input_tokens), type(call.output_tokens), type(call.max_output_tokens)) == (int, int, int)
    job = JobSpec("j", JobKind.SINGLE, np.float32(1.5), (StageSpec("s", (call,), tool_duration_s=np.int64(2)),))
    assert type(job.arrival_s) is float and job.arrival_s == 1.5
    assert type(job.stages[0].tool_duration_s) is float and job.stages[0].tool_duration_s == 2.0
    spec = InstanceSpec("i", "A100", "Llama-3-8B", max_running=np.int64(8), num_kv_blocks=np.int32(100))
    assert type(spec.max_running) is int and type(spec.num_kv_blocks) is int


def test_plain_values_are_kept_as_they_are() -> None:
    call = CallSpec(300, 20)
    assert call.max_output_tokens is None and call == CallSpec(300, 20)
    assert as_int(7.0, "f") == 7 and as_float(3, "f") == 3.0 and type(as_float(3, "f")) is float


@pytest.mark.parametrize("bad", [2.5, "12", float("inf")])
def test_a_token_count_must_be_whole(bad: object) -> None:
    with pytest.raises(ConfigError, match="input_tokens: must be a whole number"):
        CallSpec(bad, 10)  # type: ignore[arg-type]


def test_a_time_must_be_a_number() -> None:
    with pytest.raises(ConfigError, match=r"JobSpec\.arrival_s: must be a number"):
        JobSpec("j", JobKind.SINGLE, "soon", ())  # type: ignore[arg-type]


@given(st.integers(-(2**62), 2**62))
def test_integers_round_trip_through_numpy(value: int) -> None:
    assert as_int(np.int64(value), "f") == value
