"""The wire contract: what the SDK sends the gateway parses, what the gateway forwards the plugin parses, and
an absolute deadline keeps its meaning across the two clocks."""

from __future__ import annotations

import json
import math

from slosched import contract
from slosched.client.sdk import slo_headers
from slosched.core.request import Request
from slosched.gateway.calls.call import parse_slo_headers
from slosched.vllm_ext.metadata import TRUST_UNSIGNED, MetadataProblems, XargsTrust, request_metadata


def _request(**fields: object) -> Request:
    base: dict[str, object] = {
        "id": "r1",
        "job_id": "j1",
        "stage": "plan",
        "template": "t",
        "prompt_tokens": 10,
        "max_output_tokens": 20,
        "arrival_s": 5.0,
        "job_arrival_s": 4.0,
    }
    base.update(fields)
    return Request(**base)  # type: ignore[arg-type]


def test_sdk_headers_are_the_ones_the_gateway_reads() -> None:
    headers = slo_headers(deadline_ms=1500, ttft_ms=200, tpot_ms=30, tenant="gold", priority=2)
    assert set(headers) <= contract.SLO_HEADERS
    slo = parse_slo_headers(headers)
    assert (slo.deadline_ms, slo.ttft_ms, slo.tpot_ms, slo.tenant, slo.priority) == (1500, 200, 30, "gold", 2)


def test_forwarded_xargs_parse_back_on_the_engine_clock() -> None:
    """Gateway clock at 100 s reads Unix 1_700_000_000: a deadline 2.5 s ahead lands 2.5 s ahead in Unix time."""
    now_s, now_unix_s = 100.0, 1_700_000_000.0
    request = _request(deadline_s=102.5, budget_s=1.25, predicted_output_tokens=33.33, priority=3.0)
    xargs = contract.request_xargs(request, now_s, now_unix_s)
    assert set(xargs) <= set(contract.XARGS)
    problems = MetadataProblems()
    parsed = request_metadata("v1", now_unix_s, 10, 20, 0.0, xargs, problems, TRUST_UNSIGNED).request
    assert problems.num_requests_with_problems == 0
    assert parsed.deadline_s == now_unix_s + 2.5 and parsed.budget_s == 1.25
    assert (parsed.job_id, parsed.stage, parsed.priority, parsed.predicted_output_tokens) == ("j1", "plan", 3.0, 33.3)


def test_no_deadline_sends_no_deadline() -> None:
    xargs = contract.request_xargs(_request(deadline_s=math.inf, budget_s=None), 0.0, 1.0)
    assert contract.XARG_DEADLINE_UNIX_S not in xargs and contract.XARG_BUDGET_S not in xargs


def test_clock_conversions_are_inverse() -> None:
    unix = contract.gateway_to_unix_s(12.0, now_s=10.0, now_unix_s=1000.0)
    assert unix == 1002.0 and contract.unix_to_gateway_s(unix, now_s=10.0, now_unix_s=1000.0) == 12.0
    assert abs(contract.gateway_to_unix_s(0.0, 0.0) - contract.engine_now_s()) < 1.0


def test_unix_anchor_keeps_one_offset_through_jitter_and_rereads_after_a_step() -> None:
    walls = iter([1000.0, 1001.0004, 1001.9996, 1500.0, 1500.0])
    anchor = contract.UnixAnchor(drift_s=0.05, wall=lambda: next(walls))
    deadline_s = 30.0  # one job's deadline, converted on three calls while the clock reads jitter
    first = [round(contract.gateway_to_unix_s(deadline_s, now, anchor.unix_s(now)), 3) for now in (0.0, 1.0, 2.0)]
    assert first == [1030.0, 1030.0, 1030.0]
    assert anchor.unix_s(3.0) == 1500.0  # the wall clock stepped: the offset is read again, then kept
    assert anchor.unix_s(3.0) == 1500.0


def test_every_key_carries_the_prefix_and_a_known_kind() -> None:
    kinds = {"str", "number", "positive", "nonneg", "count"}
    assert all(key.startswith(contract.XARG_PREFIX) and kind in kinds for key, (kind, _) in contract.XARGS.items())


def test_signed_xargs_verify_on_the_plugin_side_and_a_changed_field_does_not() -> None:
    key = b"s" * 32
    request = _request(deadline_s=102.5, budget_s=1.25, predicted_output_tokens=3.0, priority=1.0)
    xargs = contract.request_xargs(request, 100.0, 1_700_000_000.0, key=key)
    assert xargs[contract.XARG_REQUEST_ID] == request.id and contract.XARG_SIGNATURE in xargs
    wire = json.loads(json.dumps(xargs))  # as vLLM receives them
    assert contract.verify_xargs(wire, key, f"cmpl-{request.id}-0") is None
    problems = MetadataProblems()
    parsed = request_metadata(f"cmpl-{request.id}", 1.7e9, 10, 20, 0.0, wire, problems, XargsTrust(key)).request
    assert problems.counts == {} and parsed.tenant == request.tenant and parsed.budget_s == 1.25
    assert contract.verify_xargs({**wire, contract.XARG_PRIORITY: -5}, key) == "bad_signature"
    assert contract.reserved_xarg({"a": 1, "slosched_tenant": "x"}) == "slosched_tenant"
    assert contract.reserved_xarg({"a": 1}) is None and contract.reserved_xarg("text") is None
