"""docs/grafana/slosched.json: every metric its PromQL names is in the gateway's or the endpoint picker's
/metrics output, and every label it selects on is a label of that metric."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from slosched.contract import HEADER_DEADLINE_MS, HEADER_TENANT, HEADER_TPOT_MS
from slosched.picker.config import parse_picker_config
from slosched.picker.metrics import PickerMetrics
from slosched.picker.pool import EndpointPool
from tests.gateway.helpers import harness

_DASHBOARD = Path(__file__).resolve().parents[3] / "docs" / "grafana" / "slosched.json"
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
_SELECTOR = re.compile(r"\b(slosched:[a-z0-9_]+)\s*(\{[^}]*\})?")


def _exprs(dashboard: dict[str, Any]) -> list[str]:
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    exprs += [var["query"]["query"] for var in dashboard["templating"]["list"] if var["type"] == "query"]
    return exprs


async def _scrape() -> str:
    headers = {HEADER_DEADLINE_MS: "60000", HEADER_TPOT_MS: "1000", HEADER_TENANT: "gold"}
    body = {"prompt": "hello", "max_tokens": 4, "stream": True}
    async with harness(num_stubs=2, trust_tenant_header=True) as h, httpx.AsyncClient(base_url=h.url) as client:
        assert (await client.post("/v1/completions", json=body, headers=headers)).status_code == 200
        job = (await client.post("/v1/jobs", json={"kind": "workflow"})).json()
        assert (await client.post(f"/v1/jobs/{job['id']}/complete")).status_code == 200
        return (await client.get("/metrics")).text


def _picker_scrape() -> str:
    metrics = PickerMetrics(EndpointPool(parse_picker_config({"endpoints": [{"address": "10.0.0.1:8000"}]})))
    metrics.decision.observe(0.0004)
    metrics.learned.inc()
    metrics.learned_tokens.inc(12)
    return metrics.registry_text()


def test_every_metric_and_label_the_dashboard_uses_is_exported() -> None:
    dashboard = json.loads(_DASHBOARD.read_text())
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(asyncio.run(_scrape()) + _picker_scrape()):
        for suffix in _SUFFIXES.get(family.type, ("",)):
            labels.setdefault(family.name + suffix, set())
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    exprs = _exprs(dashboard)
    assert len(exprs) >= 15
    used = set()
    for expr in exprs:
        selectors = _SELECTOR.findall(expr)
        assert selectors, f"no slosched metric in {expr!r}"
        for name, matchers in selectors:
            used.add(name)
            assert name in labels, f"{name} (in {expr!r}) is not in /metrics"
            for label in re.findall(r"([a-z_]+)\s*=~?", matchers):
                assert label in labels[name], f"{name} has no label {label!r}"
    wanted = {
        "slosched:time_to_first_token_seconds_bucket",
        "slosched:request_time_per_output_token_seconds_bucket",
        "slosched:e2e_request_latency_seconds_bucket",
        "slosched:generation_tokens_total",
        "slosched:slo_total",
        "slosched:num_requests_waiting",
        "slosched:routed_total",
        "slosched:admission_rejections_total",
        "slosched:requests_total",
        "slosched:picker_decision_seconds_bucket",
        "slosched:picker_responses_learned_total",
    }
    assert wanted <= used


def test_panels_are_well_formed() -> None:
    dashboard = json.loads(_DASHBOARD.read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["title"] and panel["targets"] and set(panel["gridPos"]) == {"x", "y", "w", "h"}
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        assert [target["refId"] for target in panel["targets"]] == [chr(65 + i) for i in range(len(panel["targets"]))]
