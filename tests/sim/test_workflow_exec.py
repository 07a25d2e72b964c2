"""Workflow execution: stages wait for their predecessors, parallel calls go out together, tool steps
take their time, and malformed workflows are rejected with the field named."""

from __future__ import annotations

import json

import pytest

from slosched.core.errors import ConfigError
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.core.request import Outcome
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from slosched.workloads.trace_io import job_from_line
from tests.conftest import make_cluster

DAG = JobSpec(
    id="q1",
    kind=JobKind.WORKFLOW,
    arrival_s=1.0,
    stages=(
        StageSpec("A", (CallSpec(300, 5),)),
        StageSpec("B", (CallSpec(2000, 80), CallSpec(1200, 40), CallSpec(900, 20)), after=("A",)),
        StageSpec("SQL", (), after=("B",), tool_duration_s=2.0),
        StageSpec("D", (CallSpec(400, 10),), after=("A", "SQL")),
    ),
)


def test_dependency_order_and_parallel_dispatch() -> None:
    result = simulate(make_cluster(), [DAG], PolicyPair.parse("round-robin+fcfs"), 0, SimOptions())
    assert result.jobs[0].outcome is Outcome.COMPLETED
    by_stage: dict[str, list] = {}
    for record in result.requests:
        by_stage.setdefault(record.stage, []).append(record)
    (a,) = by_stage["A"]
    assert a.arrival_s == DAG.arrival_s
    b = by_stage["B"]
    assert len(b) == 3 and {r.arrival_s for r in b} == {a.finish_s}  # all three released at once
    assert len({r.instance for r in b}) == 3  # and in flight together on three instances
    b_done = max(r.finish_s for r in b)
    (d,) = by_stage["D"]
    assert d.arrival_s == pytest.approx(b_done + 2.0)  # after the tool step, not just after A
    assert result.jobs[0].finish_s == d.finish_s


def _line(stages: list[dict]) -> str:
    return json.dumps({"id": "bad", "kind": "workflow", "arrival_s": 0.0, "stages": stages})


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        (
            [
                {"name": "A", "calls": [{"input_tokens": 5, "output_tokens": 1}], "after": ["B"]},
                {"name": "B", "calls": [{"input_tokens": 5, "output_tokens": 1}], "after": ["A"]},
            ],
            "dependency cycle",
        ),
        ([{"name": "A", "calls": [{"input_tokens": 5, "output_tokens": 1}], "after": ["Z"]}], "unknown stage 'Z'"),
        ([{"name": "A", "calls": []}], "needs calls or a tool_duration_s"),
        ([{"name": "A", "calls": [{"input_tokens": 0, "output_tokens": 1}]}], "input_tokens"),
        ([{"name": "A", "calls": [{"input_tokens": 5, "output_tokens": "9"}]}], "output_tokens"),
    ],
)
def test_bad_workflows_are_rejected(stages: list[dict], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        job_from_line(_line(stages), "trace line 1")


def test_workflow_line_of_the_issue_parses() -> None:
    line = (
        '{"id": "q1", "kind": "workflow", "arrival_s": 0.0, "slo_s": 240.0, "stages": ['
        '{"name": "IR", "calls": [{"input_tokens": 306, "output_tokens": 5}]},'
        '{"name": "GEN", "calls": [{"input_tokens": 12000, "output_tokens": 690},'
        ' {"input_tokens": 8134, "output_tokens": 470}]}]}'
    )
    job = job_from_line(line)
    assert job.slo_s == 240.0 and [len(s.calls) for s in job.stages] == [1, 2]
