"""``workloads.trace_dump``: short lines (defaults left out), lossless round trips through ``trace_io``,
numpy scalars written as numbers, and jobs a kind's line cannot describe refused."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec, single_job
from slosched.workloads.relquery import relquery_job
from slosched.workloads.trace_dump import job_to_dict, job_to_line
from slosched.workloads.trace_io import job_from_line


def test_a_plain_single_job_is_one_short_line() -> None:
    job = single_job("r1", 0.5, CallSpec(100, 20))
    line = job_to_line(job)
    assert " " not in line and "\n" not in line
    assert json.loads(line) == {
        "id": "r1",
        "kind": "single",
        "arrival_s": 0.5,
        "input_tokens": 100,
        "output_tokens": 20,
    }
    assert job_from_line(line) == job


def test_optional_fields_are_written_when_set() -> None:
    call = CallSpec(100, 20, 64, "sys", 32, "sess")
    job = single_job("r2", 1.0, call, slo_s=5.0, template="chat")
    fields = job_to_dict(replace(job, tenant="t1", ttft_slo_s=0.5, tpot_slo_s=0.1))
    assert fields["slo_s"] == 5.0 and fields["template"] == "chat" and fields["tenant"] == "t1"
    assert (fields["ttft_slo_s"], fields["tpot_slo_s"]) == (0.5, 0.1)
    assert (fields["max_output_tokens"], fields["prefix_key"], fields["prefix_tokens"]) == (64, "sys", 32)
    assert fields["session_id"] == "sess"
    assert "stage" not in fields  # the stage is named after the template, the default


def test_a_stage_name_other_than_the_default_is_kept() -> None:
    job = JobSpec("r", JobKind.SINGLE, 0.0, (StageSpec("answer", (CallSpec(5, 1),)),), template="chat")
    assert job_to_dict(job)["stage"] == "answer"
    assert job_from_line(job_to_line(job)) == job


def test_workflow_stages_keep_dependencies_and_tool_steps() -> None:
    stages = (
        StageSpec("plan", (CallSpec(10, 2),)),
        StageSpec("tool", (), ("plan",), 1.5),
        StageSpec("answer", (CallSpec(30, 5, 8), CallSpec(31, 6, 8)), ("plan", "tool")),
    )
    job = JobSpec("w", JobKind.WORKFLOW, 3.0, stages, slo_s=60.0)
    fields = job_to_dict(job)
    assert fields["stages"][1] == {"name": "tool", "after": ["plan"], "tool_duration_s": 1.5}
    assert "after" not in fields["stages"][0]
    assert job_from_line(job_to_line(job)) == job


def test_relquery_rows_are_written_without_the_template() -> None:
    job = relquery_job("q", 0.0, 40, [(200, 3), (150, 7)], 10, template="amazon/rate")
    fields = job_to_dict(job)
    assert fields["template_tokens"] == 40
    assert fields["rows"] == [{"input_tokens": 200, "output_tokens": 3}, {"input_tokens": 150, "output_tokens": 7}]
    assert fields["max_output_tokens"] == 10
    assert job_from_line(job_to_line(job)) == job
    assert "max_output_tokens" not in job_to_dict(relquery_job("q", 0.0, 40, [(1, 1)], None))


def test_relquery_rows_keep_their_prefix_groups() -> None:
    job = relquery_job("q", 0.0, 40, [(200, 3), (150, 7), (90, 2)], 10, groups=[("drama", 12), None, ("drama", 12)])
    fields = job_to_dict(job)
    assert fields["rows"][0] == {"input_tokens": 200, "output_tokens": 3, "group": "drama", "group_tokens": 12}
    assert fields["rows"][1] == {"input_tokens": 150, "output_tokens": 7}
    assert job_from_line(job_to_line(job)) == job


def test_numpy_scalars_are_written_as_numbers_and_other_objects_refused() -> None:
    job = single_job("n", np.float64(2.5), CallSpec(np.int64(7), np.int64(3)))  # type: ignore[arg-type]
    assert json.loads(job_to_line(job))["input_tokens"] == 7
    with pytest.raises(TypeError, match="cannot write object"):
        job_to_line(single_job("o", 0.0, CallSpec(1, 1), template=object()))  # type: ignore[arg-type]


def _relquery_with(calls: tuple[CallSpec, ...], stage: str = "rows") -> JobSpec:
    return JobSpec("q", JobKind.RELQUERY, 0.0, (StageSpec(stage, calls),))


@pytest.mark.parametrize(
    ("job", "reason"),
    [
        (JobSpec("s", JobKind.SINGLE, 0.0, (StageSpec("a", (CallSpec(1, 1), CallSpec(1, 1))),)), "exactly one stage"),
        (JobSpec("s", JobKind.SINGLE, 0.0, (StageSpec("a", (CallSpec(1, 1),), None, 2.0),)), "tool_duration_s"),
        (_relquery_with((CallSpec(5, 1, 4, "q/template", 2),), stage="other"), "one stage named 'rows'"),
        (_relquery_with(()), "at least one call"),
        (_relquery_with((CallSpec(5, 1, 4, "other", 2),)), "prefix_key 'q/template'"),
        (_relquery_with((CallSpec(5, 1, 4, "q/template", 2), CallSpec(5, 1, 4, "q/template", 3))), "equal"),
        (_relquery_with((CallSpec(5, 1, 4, "q/template", 2), CallSpec(5, 1, 5, "q/template", 2))), "same max_output"),
    ],
)
def test_jobs_a_line_cannot_describe_are_refused(job: JobSpec, reason: str) -> None:
    with pytest.raises(ConfigError) as error:
        job_to_line(job)
    assert error.value.field == f"job {job.id!r}" and reason in str(error.value)


_CALL = st.builds(
    CallSpec,
    input_tokens=st.integers(1, 10_000),
    output_tokens=st.integers(1, 500),
    max_output_tokens=st.one_of(st.none(), st.integers(500, 1000)),
    session_id=st.one_of(st.none(), st.sampled_from(["s1", "s2"])),
)


@given(
    call=_CALL,
    arrival=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    slo=st.one_of(st.none(), st.floats(min_value=0.1, max_value=1e3)),
    template=st.sampled_from(["", "chat", "code"]),
)
def test_single_jobs_round_trip(call: CallSpec, arrival: float, slo: float | None, template: str) -> None:
    job = single_job("j", arrival, call, slo_s=slo, template=template)
    assert job_from_line(job_to_line(job)) == job
