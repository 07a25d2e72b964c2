"""JSONL traces: documented formats, lossless round trips, and errors that name line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec, single_job
from slosched.workloads.generators import make_workload
from slosched.workloads.trace_io import job_from_line, job_to_line, load_jobs, parse_jobs, save_jobs

SINGLE = (
    '{"id": "r1", "kind": "single", "arrival_s": 0.0, "slo_s": 5.0, "input_tokens": 100, '
    '"output_tokens": 20, "max_output_tokens": 64, "template": "chat"}'
)
WORKFLOW = (
    '{"id": "q1", "kind": "workflow", "arrival_s": 0.0, "slo_s": 240.0, "template": "chess", "stages": '
    '[{"name": "IR", "calls": [{"input_tokens": 306, "output_tokens": 5}]}, {"name": "GEN", "calls": '
    '[{"input_tokens": 11000, "output_tokens": 553}, {"input_tokens": 7134, "output_tokens": 400}], '
    '"after": ["IR"], "tool_duration_s": 0.5}]}'
)
RELQUERY = (
    '{"id": "rq", "kind": "relquery", "arrival_s": 2.5, "template_tokens": 40, "rows": '
    '[{"input_tokens": 200, "output_tokens": 3}, {"input_tokens": 150, "output_tokens": 7}], '
    '"max_output_tokens": 10}'
)


def test_documented_formats() -> None:
    single, workflow, relquery = parse_jobs([SINGLE, WORKFLOW, RELQUERY])
    assert single == single_job("r1", 0.0, CallSpec(100, 20, 64), slo_s=5.0, template="chat")
    assert workflow.kind is JobKind.WORKFLOW and workflow.template == "chess"
    assert [stage.name for stage in workflow.stages] == ["IR", "GEN"]
    assert workflow.stages[1].after == ("IR",) and workflow.stages[1].tool_duration_s == 0.5
    assert workflow.stages[0].after is None and workflow.num_calls == 3
    assert relquery.kind is JobKind.RELQUERY and relquery.slo_s is None
    assert relquery.stages == (
        StageSpec("rows", (CallSpec(240, 3, 10, "rq/template", 40), CallSpec(190, 7, 10, "rq/template", 40))),
    )


def test_examples_round_trip_through_a_file(tmp_path: Path) -> None:
    jobs = parse_jobs([SINGLE, WORKFLOW, RELQUERY])
    path = tmp_path / "trace.jsonl"
    assert save_jobs(path, jobs) == 3
    assert load_jobs(path) == jobs
    assert len(path.read_text().splitlines()) == 3


@pytest.mark.parametrize("name", ["flowgpt", "code-w3", "azure-code"])
def test_generated_workloads_round_trip(tmp_path: Path, name: str) -> None:
    jobs = make_workload(name, {"process": "gamma", "rate": 3.0, "cv": 2.0}, 300, seed=1)
    save_jobs(tmp_path / "t.jsonl", jobs)
    assert load_jobs(tmp_path / "t.jsonl") == jobs


def test_optional_fields_are_left_out() -> None:
    line = json.loads(job_to_line(single_job("a", 1.0, CallSpec(5, 2))))
    assert line == {"id": "a", "kind": "single", "arrival_s": 1.0, "input_tokens": 5, "output_tokens": 2}


# --- malformed lines ---------------------------------------------------------------------------------

_GOOD = json.loads(SINGLE)


def _with(**changes: object) -> str:
    fields = {**_GOOD, **changes}
    return json.dumps({key: value for key, value in fields.items() if value is not ...})


@pytest.mark.parametrize(
    ("line", "field", "fragment"),
    [
        ("{not json", "json", "Invalid JSON"),
        ("[1, 2]", "", "object"),
        (_with(input_tokens="100"), "input_tokens", "valid integer, got '100'"),
        (_with(input_tokens=1.5), "input_tokens", "valid integer"),
        (_with(output_tokens=...), "output_tokens", "Field required"),
        (_with(colour="red"), "colour", "Extra inputs are not permitted"),
        (_with(kind="batch"), "kind", "'single', 'workflow', 'relquery'"),
        (_with(kind=...), "kind", "allowed kinds: single, workflow, relquery"),
        (_with(arrival_s=None), "arrival_s", "valid number"),
        (_with(id=""), "id", "at least 1 character"),
        (_with(input_tokens=0), "input_tokens", "must be >= 1"),
        (_with(max_output_tokens=5), "max_output_tokens", "must be >= output_tokens"),
        (_with(prefix_tokens=101), "prefix_tokens", "must be in [0, input_tokens]"),
        (_with(arrival_s=-1.0), "arrival_s", "must be >= 0"),
        (_with(slo_s=0.0), "slo_s", "must be > 0"),
        (WORKFLOW.replace('["IR"]', '["XR"]'), "after", "unknown stage 'XR'"),
        (
            WORKFLOW.replace('"output_tokens": 553', '"output_tokens": "many"'),
            "stages.1.calls.0.output_tokens",
            "",
        ),
        (RELQUERY.replace('"template_tokens": 40', '"template_tokens": -1'), "template_tokens", "equal to 0"),
        (RELQUERY.replace('"max_output_tokens": 10', '"max_output_tokens": 5'), "max_output_tokens", ">="),
    ],
)
def test_malformed_line_reports_line_number_and_field(line: str, field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_jobs([SINGLE.replace("r1", "r0"), "", line], source="trace.jsonl")
    message = str(caught.value)
    assert message.startswith("trace.jsonl line 3")
    assert field in caught.value.field
    assert fragment in message


def test_duplicate_ids_are_rejected() -> None:
    with pytest.raises(ConfigError, match=r"line 2, id: duplicate job id 'r1' \(first on line 1\)"):
        parse_jobs([SINGLE, SINGLE])


def test_load_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(SINGLE + "\n" + _with(id="r2", output_tokens=-3) + "\n")
    with pytest.raises(ConfigError, match=r"bad.jsonl line 2, .*output_tokens"):
        load_jobs(path)


def test_shapes_a_line_cannot_hold_are_refused() -> None:
    two_calls = JobSpec("s", JobKind.SINGLE, 0.0, (StageSpec("x", (CallSpec(1, 1), CallSpec(1, 1))),))
    with pytest.raises(ConfigError, match=r"job 's'.*exactly one stage with one call"):
        job_to_line(two_calls)
    calls = (CallSpec(9, 1, None, "q/template", 4), CallSpec(9, 1, None, "other", 4))
    mixed = JobSpec("q", JobKind.RELQUERY, 0.0, (StageSpec("rows", calls),))
    with pytest.raises(ConfigError, match="prefix_key 'q/template'"):
        job_to_line(mixed)


# --- property: any representable job round-trips -------------------------------------------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
_TIME = st.floats(min_value=0.0, max_value=1e7, allow_nan=False, allow_infinity=False)
_SLO = st.none() | st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def _calls(draw: st.DrawFn, session: bool = True) -> CallSpec:
    input_tokens = draw(st.integers(1, 200_000))
    output_tokens = draw(st.integers(1, 50_000))
    max_output = draw(st.none() | st.integers(output_tokens, 100_000))
    prefix_key = draw(st.none() | _TEXT)
    prefix_tokens = draw(st.integers(0, input_tokens))
    session_id = draw(st.none() | _TEXT) if session else None
    group_key = draw(st.none() | _TEXT) if prefix_key is not None else None
    group_tokens = draw(st.integers(0, input_tokens - prefix_tokens)) if group_key is not None else 0
    return CallSpec(
        input_tokens, output_tokens, max_output, prefix_key, prefix_tokens, session_id, group_key, group_tokens
    )


@st.composite
def _single_jobs(draw: st.DrawFn) -> JobSpec:
    template = draw(st.just("") | _TEXT)
    stage = draw(st.just(template or "call") | _TEXT)
    stages = (StageSpec(stage, (draw(_calls()),)),)
    return JobSpec(draw(_TEXT), JobKind.SINGLE, draw(_TIME), stages, draw(_SLO), draw(_TEXT), template)


@st.composite
def _workflow_jobs(draw: st.DrawFn) -> JobSpec:
    names = draw(st.lists(_TEXT, min_size=1, max_size=5, unique=True))
    stages = []
    for index, name in enumerate(names):
        calls = tuple(draw(st.lists(_calls(), max_size=3)))
        tool_s = draw(st.floats(min_value=1e-3, max_value=100) if not calls else st.just(0.0) | st.floats(0, 100))
        after = draw(st.none() | st.lists(st.sampled_from(names[:index]), unique=True).map(tuple)) if index else None
        stages.append(StageSpec(name, calls, after, tool_s))
    return JobSpec(draw(_TEXT), JobKind.WORKFLOW, draw(_TIME), tuple(stages), draw(_SLO), draw(_TEXT), draw(_TEXT))


@st.composite
def _relquery_jobs(draw: st.DrawFn) -> JobSpec:
    job_id = draw(_TEXT)
    template_tokens = draw(st.integers(0, 5000))
    max_output = draw(st.none() | st.integers(50, 100))
    rows = draw(st.lists(st.tuples(st.integers(1, 5000), st.integers(1, 50)), min_size=1, max_size=8))
    # Some rows share a prefix group (rows of a relQuery planned in prefix order), within their own input.
    groups = draw(st.lists(st.none() | st.sampled_from(["g1", "g2"]), min_size=len(rows), max_size=len(rows)))
    calls = tuple(
        CallSpec(
            template_tokens + row_in,
            row_out,
            max_output,
            f"{job_id}/template",
            template_tokens,
            group_key=group,
            group_tokens=draw(st.integers(0, row_in)) if group is not None else 0,
        )
        for (row_in, row_out), group in zip(rows, groups, strict=True)
    )
    stages = (StageSpec("rows", calls),)
    return JobSpec(job_id, JobKind.RELQUERY, draw(_TIME), stages, draw(_SLO), draw(_TEXT), draw(_TEXT))


@settings(max_examples=300, deadline=None)
@given(st.one_of(_single_jobs(), _workflow_jobs(), _relquery_jobs()))
def test_any_job_round_trips(job: JobSpec) -> None:
    line = job_to_line(job)
    assert "\n" not in line
    assert job_from_line(line) == job


@settings(max_examples=30, deadline=None)
@given(st.lists(st.one_of(_single_jobs(), _workflow_jobs(), _relquery_jobs()), max_size=6, unique_by=lambda j: j.id))
def test_any_trace_round_trips(tmp_path_factory: pytest.TempPathFactory, jobs: list[JobSpec]) -> None:
    path = tmp_path_factory.mktemp("trace") / "jobs.jsonl"
    save_jobs(path, jobs)
    assert load_jobs(path) == jobs


def test_token_slos_round_trip_and_chat_generators_carry_them() -> None:
    from slosched.workloads.generators import make_workload
    from slosched.workloads.trace_io import job_from_line, job_to_line

    for name, params in (("flowgpt", {"tpot_slo_s": 0.012}), ("summarization", {"ttft_slo_s": 2.0, "tpot_slo_s": 0.1})):
        jobs = make_workload(name, {"process": "poisson", "rate": 2.0}, 20, params, seed=1)
        assert all(job.tpot_slo_s == params["tpot_slo_s"] for job in jobs)
        assert all(job.ttft_slo_s == params.get("ttft_slo_s") for job in jobs)
        assert [job_from_line(job_to_line(job)) for job in jobs] == jobs
    plain = make_workload("coding", {"process": "poisson", "rate": 2.0}, 5, {}, seed=1)
    assert "slo" not in job_to_line(plain[0])
