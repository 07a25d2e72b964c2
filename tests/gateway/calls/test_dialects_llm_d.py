"""llm-d's fields: the canonical ``x-llm-d-slo-*-ms`` headers as TTFT/TPOT SLOs (their deprecated aliases
are slosched's own ``x-slo-*-ms`` and win), and the inference objective's name as the call's stage."""

from __future__ import annotations

import pytest

from slosched.gateway.calls.dialects.llm_d import LlmDDialect
from tests.gateway.calls.dialect_routes import TENANTS, P, make_routes

DIALECT = LlmDDialect()


def test_slo_headers_and_objective() -> None:
    headers = {"x-llm-d-slo-ttft-ms": "250", "x-llm-d-slo-tpot-ms": "40", "x-llm-d-inference-objective": "chat-hi"}
    hints = DIALECT.read(headers, P)
    assert hints is not None and (hints.ttft_ms, hints.tpot_ms, hints.stage) == (250.0, 40.0, "chat-hi")
    alias = DIALECT.read({"x-gateway-inference-objective": "old"}, P)
    assert alias is not None and alias.stage == "old"
    both = DIALECT.read({"x-gateway-inference-objective": "old", "x-llm-d-inference-objective": "new"}, P)
    assert both is not None and both.stage == "new"  # the canonical name wins, as llm-d documents
    assert DIALECT.read({}, P) is None


def test_through_the_routes_slosched_headers_win_and_floors_apply() -> None:
    routes = make_routes(TENANTS)
    headers = {"authorization": "Bearer sk-acme", "x-llm-d-slo-ttft-ms": "50", "x-llm-d-slo-tpot-ms": "30"}
    assert routes.post(P, headers)[0] == 200
    request = routes.last.request
    assert request.ttft_slo_s == 0.2  # 50 ms is under acme's floor of 200 ms: raised, as the header path does
    assert request.tpot_slo_s == pytest.approx(0.03)
    assert routes.post(P, {**headers, "x-slo-tpot-ms": "90"})[0] == 200
    assert routes.last.request.tpot_slo_s == pytest.approx(0.09)  # slosched's own header wins
    assert routes.post(P, {"authorization": "Bearer sk-acme", "x-llm-d-inference-objective": "batch"})[0] == 200
    assert routes.last.request.stage == "batch"


@pytest.mark.parametrize("value", ["-1", "0", "fast", "nan", "1e10"])
def test_bad_slo_header_is_a_400_naming_it(value: str) -> None:
    routes = make_routes()
    status, body = routes.post(P, {"x-llm-d-slo-ttft-ms": value})
    assert status == 400 and body["error"]["param"] == "header x-llm-d-slo-ttft-ms"
    assert "milliseconds in (0, 1e9]" in body["error"]["message"]
