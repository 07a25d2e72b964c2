"""vllm-router's Program fields: ``vllm_xargs.agentic_context`` and the coding agents' session headers, read
into one job (the root program's, or the task's) with its deadline counted from the job's first call."""

from __future__ import annotations

import math

import pytest

from slosched.gateway.calls.call import HttpError
from slosched.gateway.calls.dialects.vllm_router import VllmRouterDialect
from tests.gateway.calls.dialect_routes import P, first_call_belief, make_routes

DIALECT = VllmRouterDialect()


def context(**fields: object) -> dict[str, object]:
    return {**P, "vllm_xargs": {"agentic_context": fields, "other_plugin": 1}}


def test_context_maps_every_field() -> None:
    body = context(
        program_id="p-child",
        parent_program_id="p-root",
        root_program_id="p-root",
        priority=-3,
        deadline_seconds=20,
        expected_output_length=77,
        kv_retention_ttl_seconds=600,
        blocks_parent=True,  # unknown to slosched: accepted, ignored
    )
    hints = DIALECT.read({}, body)
    assert hints is not None
    assert (hints.job_id, hints.program_id, hints.parent_id) == ("p-root", "p-child", "p-root")
    assert (hints.priority, hints.deadline_s, hints.output_tokens, hints.kv_retention_s) == (-3, 20, 77, 600)


def test_session_is_the_job_when_there_is_no_root() -> None:
    hints = DIALECT.read({}, context(session_id="task-1", program_id="p"))
    assert hints is not None and (hints.job_id, hints.program_id) == ("task-1", "p")


def test_the_object_wins_over_headers_and_schemas_never_mix() -> None:
    headers = {"x-claude-code-session-id": "claude-task", "x-session-id": "generic"}
    hints = DIALECT.read(headers, context(program_id="p"))
    assert hints is not None and hints.job_id is None and hints.program_id == "p"
    hints = DIALECT.read(headers, P)
    assert hints is not None and hints.job_id == "claude-task"


@pytest.mark.parametrize(
    ("headers", "job", "program", "parent"),
    [
        ({"x-claude-code-session-id": "t", "x-claude-code-agent-id": "a", "x-claude-code-parent-agent-id": "l"},
         "t", "a", "l"),
        ({"session-id": "codex", "thread-id": "th"}, "codex", "th", None),
        ({"x-session-id": "s"}, "s", "s", None),
    ],
)  # fmt: skip
def test_header_schemas(headers: dict[str, str], job: str, program: str, parent: str | None) -> None:
    hints = DIALECT.read(headers, P)
    assert hints is not None and (hints.job_id, hints.program_id, hints.parent_id) == (job, program, parent)


def test_strip_removes_only_the_context() -> None:
    body = context(program_id="p")
    DIALECT.strip(body)
    assert body["vllm_xargs"] == {"other_plugin": 1}
    lone = {**P, "vllm_xargs": {"agentic_context": {"program_id": "p"}}}
    DIALECT.strip(lone)
    assert "vllm_xargs" not in lone


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"deadline_seconds": -1}, "deadline_seconds"),
        ({"deadline_seconds": 0}, "deadline_seconds"),
        ({"deadline_seconds": "soon"}, "deadline_seconds"),
        ({"priority": "high"}, "priority"),
        ({"priority": True}, "priority"),
        ({"expected_output_length": 1.5}, "expected_output_length"),
        ({"kv_retention_ttl_seconds": -5}, "kv_retention_ttl_seconds"),
        ({"program_id": 7}, "program_id"),
        ({"program_id": "x" * 129}, "program_id"),
        ({"slosched_priority": -100}, "slosched_priority"),
    ],
)
def test_bad_values_are_400s_naming_the_field(fields: dict[str, object], named: str) -> None:
    with pytest.raises(HttpError) as caught:
        DIALECT.read({}, context(**fields))
    assert caught.value.status == 400 and caught.value.param == f"vllm_xargs.agentic_context.{named}"


def test_context_that_is_not_an_object() -> None:
    routes = make_routes()
    status, body = routes.post({**P, "vllm_xargs": {"agentic_context": [1]}})
    assert status == 400 and body["error"]["param"] == "vllm_xargs.agentic_context"
    assert "expected an object" in body["error"]["message"]


def test_calls_of_a_program_tree_are_one_job_with_one_deadline() -> None:
    routes = make_routes()
    assert routes.post(context(program_id="root", deadline_seconds=30, expected_output_length=5))[0] == 200
    first = routes.last.request
    routes.now[0] += 12.0  # a tool call later, a subagent of the root
    assert routes.post(context(program_id="sub", parent_program_id="root"))[0] == 200
    second = routes.last.request
    assert first.job_id == second.job_id == "default/root"
    assert first.deadline_s == second.deadline_s == 130.0  # the first call's arrival (100) + 30 s
    assert second.job_arrival_s == 100.0 and second.arrival_s == 112.0
    assert (first.session_id, second.session_id) == ("root", "sub")  # each program keeps its KV home
    assert first.predicted_output_tokens == first_call_belief(first, 5.0)  # the prior weighed with the predictor
    assert "vllm_xargs" in routes.last.body and "agentic_context" not in routes.last.body["vllm_xargs"]


def test_no_deadline_means_none() -> None:
    routes = make_routes()
    assert routes.post(P, {"x-session-id": "s"})[0] == 200
    assert routes.last.request.job_id == "default/s" and math.isinf(routes.last.request.deadline_s)
