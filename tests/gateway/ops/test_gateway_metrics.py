"""The gateway's /metrics after traffic: vLLM-style histograms and token counters with model and tenant
labels, bounded tenants, SLO results per tenant (missed for rejected calls too), per-quantity buckets."""

from __future__ import annotations

import asyncio

import httpx
from prometheus_client.parser import text_string_to_metric_families

from slosched.contract import HEADER_DEADLINE_MS, HEADER_TENANT, HEADER_TPOT_MS, HEADER_TTFT_MS
from slosched.devtools.stub import StubBehaviour
from slosched.gateway.ops.buckets import E2E_BUCKETS, QUEUE_BUCKETS, TPOT_BUCKETS, TTFT_BUCKETS
from slosched.gateway.ops.metric_names import DEPRECATED_NAMES, NAMES_WITHOUT_ALIAS
from slosched.gateway.ops.prometheus import OTHER_TENANT, GatewayMetrics, TenantLabels, counter_value
from tests.gateway.helpers import harness

_SLO = {HEADER_DEADLINE_MS: "60000", HEADER_TTFT_MS: "30000", HEADER_TPOT_MS: "10000"}


def test_tenant_labels_keep_configured_tenants_and_fold_the_rest() -> None:
    labels = TenantLabels(lambda: {"gold", "silver"}, max_tenants=2)
    assert [labels(name) for name in ["a", "gold", "b", "c", "default", "silver", "a", "d"]] == [
        "a",
        "gold",
        "b",
        OTHER_TENANT,
        "default",
        "silver",
        "a",
        OTHER_TENANT,
    ]


def test_counter_value_sums_over_labels_left_out() -> None:
    metrics = GatewayMetrics(list)
    metrics.labelled(metrics.slo, "ttft", "true", "a").inc()
    metrics.labelled(metrics.slo, "ttft", "true", "b").inc(2)
    metrics.labelled(metrics.slo, "ttft", "false", "b").inc()
    assert counter_value(metrics, "slosched_slo_total", [("kind", "ttft"), ("met", "true")]) == 3
    assert counter_value(metrics, "slosched_slo_total", [("tenant", "b")]) == 3
    assert counter_value(metrics, "slosched_slo_total", [("tenant", "zzz")]) == 0


def _buckets(text: str, name: str) -> list[float]:
    for family in text_string_to_metric_families(text):
        if family.name == name:
            return sorted({float(s.labels["le"]) for s in family.samples if s.name == f"{name}_bucket"})
    raise AssertionError(f"{name} missing")


def test_metrics_after_streamed_and_plain_calls_per_tenant() -> None:
    async def scenario() -> None:
        async with harness(num_stubs=2, trust_tenant_header=True, metrics_max_tenants=2) as h:
            async with httpx.AsyncClient(base_url=h.url, timeout=10) as client:
                for tenant in ["t1", "t2", "t3", "t4"]:  # t3, t4: beyond the cap of 2 header tenants
                    body = {"prompt": "x" * 40, "max_tokens": 5, "stream": True}
                    answer = await client.post("/v1/completions", json=body, headers={**_SLO, HEADER_TENANT: tenant})
                    assert answer.status_code == 200
                chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
                assert (await client.post("/v1/chat/completions", json=chat)).status_code == 200
                text = (await client.get("/metrics")).text
            model = h.gateway.config.backends[0].model
            assert h.value("slosched:generation_tokens_total", tenant="t1", model_name=model) == 5
            assert h.value("slosched:generation_tokens_total", tenant=OTHER_TENANT) == 10
            assert h.value("slosched:generation_tokens_total", tenant="default") == 3
            assert h.value("slosched:prompt_tokens_total", tenant="t2") == 10  # 40 characters / 4
            assert (
                h.value("slosched:request_time_per_output_token_seconds_count", tenant="t1") == 1
            )  # streamed calls only
            assert h.value("slosched:request_time_per_output_token_seconds_count", tenant="default") == 0
            latency = h.value("slosched:e2e_request_latency_seconds_count")
            assert h.value("slosched:time_to_first_token_seconds_count") == latency == 5
            for kind in ["deadline", "ttft", "tpot"]:
                assert h.value("slosched:slo_total", kind=kind, met="true", tenant=OTHER_TENANT) == 2
                assert h.value("slosched:slo_total", kind=kind, met="true") == 4
            assert 'tenant="t3"' not in text and f'tenant="{OTHER_TENANT}"' in text
            assert _buckets(text, "slosched:time_to_first_token_seconds") == [*TTFT_BUCKETS, float("inf")]
            assert _buckets(text, "slosched:request_time_per_output_token_seconds") == [*TPOT_BUCKETS, float("inf")]
            assert _buckets(text, "slosched:e2e_request_latency_seconds") == [*E2E_BUCKETS, float("inf")]
            assert _buckets(text, "slosched:request_queue_time_seconds") == [*QUEUE_BUCKETS, float("inf")]

            _assert_deprecated_aliases(text)

    asyncio.run(scenario())


def test_a_stream_of_n_choices_is_timed_per_sequence_and_counts_every_prompt() -> None:
    """n choices decode side by side, their events interleaved: time per output token is one sequence's (as
    vLLM's own histogram), so four choices at 40 ms a step miss a 25 ms TPOT SLO that the sum of their
    tokens (10 ms apart) would pass; a batch's prompts all count as prompt tokens."""

    async def scenario() -> None:
        async with harness(num_stubs=1, trust_tenant_header=True) as h:
            h.stubs[0].behaviour = StubBehaviour(token_delay_s=0.04)
            headers = {HEADER_TPOT_MS: "25", HEADER_TENANT: "t1"}
            body = {"prompt": ["x" * 40, "y" * 80], "max_tokens": 6, "n": 2, "stream": True}
            async with httpx.AsyncClient(base_url=h.url, timeout=10) as client:
                assert (await client.post("/v1/completions", json=body, headers=headers)).status_code == 200
            assert h.value("slosched:slo_total", kind="tpot", met="false", tenant="t1") == 1
            tpot = h.value("slosched:request_time_per_output_token_seconds_sum", tenant="t1")
            assert 0.035 <= tpot <= 0.1
            assert h.value("slosched:generation_tokens_total", tenant="t1") == 24
            assert h.value("slosched:prompt_tokens_total", tenant="t1") == 30  # (40 + 80) characters / 4

    asyncio.run(scenario())


def _assert_deprecated_aliases(text: str) -> None:
    """Every current family is also exported under its deprecated name, with the same samples and ``model``
    for ``model_name`` (one release of overlap for dashboards and alerts)."""
    families = {family.name: family for family in text_string_to_metric_families(text)}
    for new, old in DEPRECATED_NAMES.items():
        assert new in families and old in families, (new, old)
        assert families[old].documentation.startswith(f"deprecated, use {new}")
        renamed = [
            (s.name.replace(new, old), {("model" if k == "model_name" else k): v for k, v in s.labels.items()}, s.value)
            for s in families[new].samples
        ]
        assert renamed == [(s.name, s.labels, s.value) for s in families[old].samples]
    latency = families["slosched:e2e_request_latency_seconds"].samples[0].labels
    assert "model_name" in latency and "model" not in latency


def test_a_rejected_call_counts_each_declared_slo_as_missed() -> None:
    async def scenario() -> None:
        async with harness(num_stubs=1, trust_tenant_header=True) as h:
            h.gateway.dispatcher.backends[0].mark_down("test: down")
            h.gateway.dispatcher.backends[0].down_since_s = float("inf")  # not even a probe
            headers = {HEADER_DEADLINE_MS: "1000", HEADER_TTFT_MS: "500", HEADER_TENANT: "t9"}
            async with httpx.AsyncClient(base_url=h.url, timeout=10) as client:
                answer = await client.post("/v1/completions", json={"prompt": "x", "max_tokens": 2}, headers=headers)
            assert answer.status_code == 503
            assert h.value("slosched_slo_total", met="false", tenant="t9") == 2  # deadline and ttft
            assert h.value("slosched_slo_total", met="true") == 0
            assert h.value("slosched_generation_tokens_total") == 0  # never forwarded

    asyncio.run(scenario())


def test_the_gateway_and_the_plugin_share_one_naming_scheme() -> None:
    """``slosched:`` as vLLM's ``vllm:``: the gateway's current names and the plugin's engine gauges."""
    from slosched.vllm_ext.state_metrics import GAUGE_NAMES

    families = {family.name for family in GatewayMetrics(list).current.collect()}
    assert families == set(DEPRECATED_NAMES) | set(NAMES_WITHOUT_ALIAS)
    assert all(name.startswith("slosched:") for name in [*families, *GAUGE_NAMES])
