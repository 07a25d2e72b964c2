"""The dialects together: slosched's own headers win, the tenant's class and floors bound dialect values as
they bound headers, a tenant cannot join another's job by reusing its session id, nothing a dialect carries
reaches the engine's signed fields; and (hypothesis) any dialect object either maps or is one 400 naming a
field, never a 5xx."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.contract import XARG_DEADLINE_UNIX_S, XARG_JOB_ID, XARG_PRIORITY, request_xargs, verify_xargs
from tests.gateway.calls.dialect_routes import TENANTS, P, first_call_belief, make_routes

ACME = {"authorization": "Bearer sk-acme"}
GOLD = {"authorization": "Bearer sk-gold"}


def router(**fields: Any) -> dict[str, Any]:
    return {**P, "vllm_xargs": {"agentic_context": fields}}


def test_slosched_headers_win_over_dialect_fields() -> None:
    routes = make_routes()
    headers = {"x-job-id": "mine", "x-slo-priority": "7", "x-slo-deadline-ms": "5000"}
    assert routes.post(router(program_id="p", priority=-5, deadline_seconds=60), headers)[0] == 200
    request = routes.last.request
    assert request.job_id == "default/mine" and request.priority == 7.0
    assert request.deadline_s == 105.0  # the header's per-call meaning: this arrival + 5 s
    assert request.session_id == "p"  # the program still keys its KV home


def test_dialect_order_vllm_router_then_dynamo() -> None:
    routes = make_routes()
    body = {**router(program_id="p", priority=4), "nvext": {"agent_hints": {"priority": 100, "osl": 3}}}
    assert routes.post(body, {"x-dynamo-session-id": "d"})[0] == 200
    request = routes.last.request
    assert request.priority == 4.0 and request.job_id == "default/p"
    assert request.predicted_output_tokens == first_call_belief(request, 3.0)  # vllm-router left it to Dynamo


def test_priority_above_the_tenants_class_is_clamped_and_deadline_floored() -> None:
    routes = make_routes(TENANTS)
    assert routes.post(router(program_id="p", priority=-50, deadline_seconds=0.1), ACME)[0] == 200
    request = routes.last.request
    assert request.priority == 2.0  # acme's class: a dialect cannot buy a sooner one
    assert request.deadline_s == 101.0  # acme's min_slo_s of 1 s, from the job's first call
    dynamo = {**P, "nvext": {"agent_hints": {"priority": 10**6, "strict_priority": 1000}}}
    assert routes.post(dynamo, ACME)[0] == 200 and routes.last.request.priority == 2.0


def test_a_tenant_cannot_join_another_tenants_job() -> None:
    routes = make_routes(TENANTS)
    assert routes.post(router(program_id="shared", deadline_seconds=10), GOLD)[0] == 200
    gold = routes.last.request
    routes.now[0] += 5.0
    assert routes.post(router(program_id="shared", deadline_seconds=600), ACME)[0] == 200
    acme = routes.last.request
    assert (gold.job_id, acme.job_id) == ("gold/shared", "acme/shared")
    assert (gold.deadline_s, acme.deadline_s) == (110.0, 705.0)  # each its own first call and deadline
    sessions = routes.routes.sessions
    gold_job, acme_job = sessions.get("gold", "shared", 106.0), sessions.get("acme", "shared", 106.0)
    assert gold_job is not None and acme_job is not None and gold_job.calls == acme_job.calls == 1


def test_signed_fields_come_from_the_gateway_never_from_a_dialect() -> None:
    routes = make_routes(TENANTS)
    body = router(program_id="p", priority=-50, deadline_seconds=30)
    body["vllm_xargs"]["agentic_context"]["slosched_job_id"] = "victim"
    status, error = routes.post(body, ACME)
    assert status == 400 and error["error"]["param"] == "vllm_xargs.agentic_context.slosched_job_id"
    body["vllm_xargs"]["agentic_context"].pop("slosched_job_id")
    assert routes.post(body, ACME)[0] == 200
    call = routes.last
    key = b"k" * 32
    xargs = request_xargs(call.request, 100.0, now_unix_s=1000.0, key=key)
    assert verify_xargs(xargs, key) is None
    assert xargs[XARG_JOB_ID] == "acme/p" and xargs[XARG_PRIORITY] == 2.0
    assert xargs[XARG_DEADLINE_UNIX_S] == 1030.0
    assert "agentic_context" not in call.body.get("vllm_xargs", {})


_scalar = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=140)
)
_value = _scalar | st.lists(_scalar, max_size=2) | st.dictionaries(st.text(max_size=6), _scalar, max_size=2)
_ROUTER_KEYS = [
    "program_id", "parent_program_id", "root_program_id", "session_id", "priority", "deadline_seconds",
    "expected_output_length", "kv_retention_ttl_seconds", "slosched_budget_s", "blocks_parent",
]  # fmt: skip
_DYNAMO_KEYS = ["priority", "strict_priority", "osl", "speculative_prefill", "latency_sensitivity"]
_HEADERS = [
    "x-claude-code-session-id", "x-claude-code-agent-id", "session-id", "thread-id", "x-session-id",
    "x-dynamo-session-id", "x-dynamo-parent-session-id", "x-llm-d-slo-ttft-ms", "x-llm-d-slo-tpot-ms",
    "x-llm-d-inference-objective",
]  # fmt: skip
_header_values = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=140)
ROUTES = make_routes(TENANTS)


@settings(max_examples=150, deadline=None)
@given(
    context=st.one_of(_value, st.dictionaries(st.sampled_from(_ROUTER_KEYS), _value, max_size=4)),
    hints=st.one_of(_value, st.dictionaries(st.sampled_from(_DYNAMO_KEYS), _value, max_size=3)),
    headers=st.dictionaries(st.sampled_from(_HEADERS), _header_values, max_size=3),
)
def test_any_dialect_input_maps_or_is_one_400_naming_a_field(context: Any, hints: Any, headers: Any) -> None:
    body = {**P, "vllm_xargs": {"agentic_context": context}, "nvext": {"agent_hints": hints}}
    status, answer = ROUTES.post(body, {**ACME, **headers})
    assert status in (200, 400), answer
    if status == 400:
        error = answer["error"]
        assert error["param"] and error["message"].startswith(error["param"]) and len(error["message"]) < 300
    else:
        forwarded = ROUTES.last.body
        assert "agentic_context" not in forwarded.get("vllm_xargs", {}) and "nvext" not in forwarded
        assert ROUTES.last.request.priority >= 2.0  # acme's class holds whatever the dialects said


def test_a_tiny_output_prior_moves_the_belief_at_most_halfway() -> None:
    """A client claiming one-token outputs (to jump a shortest-first queue) keeps at least half the belief the
    predictor gives the same call without the claim."""
    plain, hinted = make_routes(), make_routes()
    assert plain.post(P, {"x-session-id": "s"})[0] == 200
    body = {**P, "nvext": {"agent_hints": {"osl": 1}}}
    assert hinted.post(body, {"x-session-id": "s"})[0] == 200
    without, claimed = plain.last.request.predicted_output_tokens, hinted.last.request.predicted_output_tokens
    assert without / 2 <= claimed < without
