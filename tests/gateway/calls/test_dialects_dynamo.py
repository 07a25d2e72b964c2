"""NVIDIA Dynamo's fields: ``nvext.agent_hints`` (priority with Dynamo's higher-runs-sooner convention turned
into slosched's lower-runs-sooner, strict tiers above it, ``osl`` as the output prior) and the session
headers (a subagent's session joins its parent's job)."""

from __future__ import annotations

import pytest

from slosched.gateway.calls.call import HttpError
from slosched.gateway.calls.dialects.dynamo import DynamoDialect
from tests.gateway.calls.dialect_routes import P, first_call_belief, make_routes

DIALECT = DynamoDialect()


def hinted(**hints: object) -> dict[str, object]:
    return {**P, "nvext": {"agent_hints": hints, "annotations": ["keep"]}}


def test_priority_is_turned_around_and_tiers_dominate() -> None:
    high, low = DIALECT.read({}, hinted(priority=5)), DIALECT.read({}, hinted(priority=1))
    assert high is not None and low is not None and high.priority is not None and low.priority is not None
    assert high.priority < low.priority  # Dynamo's higher priority runs sooner here too
    tiered = DIALECT.read({}, hinted(priority=-1000, strict_priority=1))
    assert tiered is not None and tiered.priority is not None and tiered.priority < high.priority


def test_osl_session_and_parent() -> None:
    headers = {"x-dynamo-session-id": "run-42:researcher", "x-dynamo-parent-session-id": "run-42"}
    hints = DIALECT.read(headers, hinted(osl=300, speculative_prefill=True))
    assert hints is not None
    assert (hints.program_id, hints.parent_id, hints.output_tokens) == ("run-42:researcher", "run-42", 300.0)


def test_nothing_dynamo_is_none() -> None:
    assert DIALECT.read({}, P) is None
    assert DIALECT.read({}, {**P, "nvext": {}}) is None


def test_strip_keeps_the_rest_of_nvext() -> None:
    body = hinted(osl=3)
    DIALECT.strip(body)
    assert body["nvext"] == {"annotations": ["keep"]}
    lone = {**P, "nvext": {"agent_hints": {"osl": 3}}}
    DIALECT.strip(lone)
    assert "nvext" not in lone


@pytest.mark.parametrize(
    ("hints", "named"),
    [
        ({"priority": "urgent"}, "nvext.agent_hints.priority"),
        ({"priority": 1e300}, "nvext.agent_hints.priority"),
        ({"strict_priority": 1.5}, "nvext.agent_hints.strict_priority"),
        ({"osl": 0}, "nvext.agent_hints.osl"),
        ({"osl": "long"}, "nvext.agent_hints.osl"),
        ({"speculative_prefill": "yes"}, "nvext.agent_hints.speculative_prefill"),
        ({"slosched_sig": "00"}, "nvext.agent_hints.slosched_sig"),
    ],
)
def test_bad_hints_are_400s_naming_the_field(hints: dict[str, object], named: str) -> None:
    with pytest.raises(HttpError) as caught:
        DIALECT.read({}, hinted(**hints))
    assert caught.value.status == 400 and caught.value.param == named


def test_bad_containers_and_headers() -> None:
    routes = make_routes()
    status, body = routes.post({**P, "nvext": "hints"})
    assert status == 400 and body["error"]["param"] == "nvext"
    status, body = routes.post({**P, "nvext": {"agent_hints": 3}})
    assert status == 400 and body["error"]["param"] == "nvext.agent_hints"
    status, body = routes.post(P, {"x-dynamo-session-id": "s" * 200})
    assert status == 400 and body["error"]["param"] == "header x-dynamo-session-id"


def test_subagent_session_joins_the_parents_job() -> None:
    routes = make_routes()
    assert routes.post(hinted(osl=4), {"x-dynamo-session-id": "lead"})[0] == 200
    lead = routes.last.request
    routes.now[0] += 3.0
    headers = {"x-dynamo-session-id": "helper", "x-dynamo-parent-session-id": "lead"}
    assert routes.post(P, headers)[0] == 200
    helper = routes.last.request
    assert lead.job_id == helper.job_id == "default/lead" and helper.job_arrival_s == lead.arrival_s
    assert (lead.session_id, helper.session_id) == ("lead", "helper")
    assert lead.predicted_output_tokens == first_call_belief(lead, 4.0)
    assert routes.last.body.get("nvext") is None  # consumed: vLLM never sees Dynamo's extension
