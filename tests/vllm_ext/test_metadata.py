from __future__ import annotations

import math

import pytest

from slosched.contract import XARGS, sign_xargs
from slosched.vllm_ext.metadata import (
    TRUST_UNSIGNED,
    MetadataProblems,
    XargsTrust,
    parse_extra_args,
    request_metadata,
)


def _meta(xargs: dict[str, object] | None, priority: float = 0.0) -> tuple[object, MetadataProblems]:
    problems = MetadataProblems()
    return request_metadata("req-1", 1000.0, 50, 32, priority, xargs, problems, TRUST_UNSIGNED), problems


def test_full_metadata_maps_to_request_fields() -> None:
    meta, problems = _meta(
        {
            "slosched_job_id": "job-7",
            "slosched_stage": "sql",
            "slosched_predicted_tokens": "40",
            "slosched_deadline_unix_s": 1012.5,
            "slosched_budget_s": 3,
            "slosched_priority": -2,
            "slosched_relquery_size": 12,
            "slosched_tpot_slo_s": 0.05,
            "other_plugin_key": "ignored",
        }
    )
    request = meta.request  # type: ignore[attr-defined]
    assert (request.job_id, request.stage, request.predicted_output_tokens) == ("job-7", "sql", 40.0)
    assert (request.deadline_s, request.budget_s, request.priority, request.tpot_slo_s) == (1012.5, 3.0, -2.0, 0.05)
    assert meta.relquery_size == 12  # type: ignore[attr-defined]
    assert problems.counts == {} and problems.num_requests_with_problems == 0


def test_missing_metadata_takes_defaults() -> None:
    meta, problems = _meta(None, priority=5)
    request = meta.request  # type: ignore[attr-defined]
    assert request.job_id == "req-1" and request.stage == "default" and math.isinf(request.deadline_s)
    assert request.priority == 5.0 and request.budget_s is None and request.max_output_tokens == 32
    assert problems.num_requests == 1 and not problems.counts


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("slosched_deadline_unix_s", "tomorrow"),
        ("slosched_deadline_unix_s", float("nan")),
        ("slosched_budget_s", -1),
        ("slosched_predicted_tokens", -5),
        ("slosched_relquery_size", 2.5),
        ("slosched_priority", True),
        ("slosched_job_id", ""),
    ],
)
def test_bad_field_takes_default_and_is_counted(key: str, value: object) -> None:
    meta, problems = _meta({key: value, "slosched_stage": "ok"})
    assert problems.counts == {key: 1} and problems.num_requests_with_problems == 1
    assert meta.request.stage == "ok"  # type: ignore[attr-defined]  # the good fields still apply


def test_unknown_slosched_key_is_counted_and_relative_slo_sets_deadline() -> None:
    meta, problems = _meta({"slosched_dedline": 3, "slosched_slo_s": 4, "slosched_relquery_id": "rq"})
    assert problems.counts == {"unknown:slosched_dedline": 1}
    assert meta.request.deadline_s == 1004.0 and meta.request.job_id == "rq"  # type: ignore[attr-defined]


def test_absolute_deadline_wins_and_schema_documents_every_key() -> None:
    meta, _ = _meta({"slosched_slo_s": 4, "slosched_deadline_unix_s": 2000})
    assert meta.request.deadline_s == 2000.0  # type: ignore[attr-defined]
    assert all(key.startswith("slosched_") and text for key, (_, text) in XARGS.items())
    assert parse_extra_args({"slosched_stage": 7}, MetadataProblems(), TRUST_UNSIGNED) == {"slosched_stage": "7"}


KEY = b"k" * 32
_CLAIM = {"slosched_tenant": "gold", "slosched_ttft_slo_s": 1e-6, "slosched_deadline_unix_s": 1000.001}


def test_plugin_believes_only_fields_the_gateway_signed() -> None:
    """A client that reaches vLLM directly cannot claim a tenant or beat a floor: unsigned, forged or
    copied fields are all ignored (defaults), and counted."""
    trust = XargsTrust(KEY)
    for xargs, why in (
        (dict(_CLAIM), "unsigned"),
        ({**sign_xargs(dict(_CLAIM), "req-1", KEY), "slosched_tenant": "other"}, "bad_signature"),
        (sign_xargs(dict(_CLAIM), "req-1", b"x" * 32), "bad_signature"),
        (sign_xargs(dict(_CLAIM), "req-9", KEY), "request_id_mismatch"),
    ):
        problems = MetadataProblems()
        request = request_metadata("cmpl-req-1-0", 1000.0, 50, 32, 0, xargs, problems, trust).request
        assert (request.tenant, request.ttft_slo_s, math.isinf(request.deadline_s)) == ("default", None, True)
        assert problems.counts == {f"untrusted:{why}": 1}
    signed = sign_xargs(dict(_CLAIM), "req-1", KEY)
    problems = MetadataProblems()
    request = request_metadata("cmpl-req-1-0", 1000.0, 50, 32, 0, signed, problems, trust).request
    assert (request.tenant, request.ttft_slo_s, request.deadline_s) == ("gold", 1e-6, 1000.001)
    assert problems.counts == {}


def test_plugin_without_a_key_believes_nothing() -> None:
    problems = MetadataProblems()
    signed = sign_xargs(dict(_CLAIM), "req-1", KEY)
    request = request_metadata("req-1", 1000.0, 50, 32, 3, signed, problems, XargsTrust.from_env({})).request
    assert (request.tenant, request.priority) == ("default", 3.0) and problems.counts == {"untrusted:no_key": 1}
