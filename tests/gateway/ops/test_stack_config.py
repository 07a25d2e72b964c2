"""The slosched stack by one name in the gateway config (``policies: {stack: slosched}``) and in
``slosched up`` (issue 15): it builds the stack's three layers, rejects layers named beside it, and serves
calls with deadlines through stub backends."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from slosched.core.errors import ConfigError
from slosched.devtools.bring_up import gateway_policies
from slosched.gateway.ops.config import PolicyConfig, parse_config
from tests.gateway.helpers import harness


def test_the_stack_sets_every_layer_from_one_block() -> None:
    spec = PolicyConfig(stack="slosched", stack_params={"token_budget": 512}).spec()
    assert (spec.router, spec.engine.name, spec.job) == ("deadline-completion", "deadline-triage", "critical-path")
    assert spec.engine.params == {"token_budget": 512}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"stack": "slosched", "router": "prism"}, r"^policies\.stack: a stack sets its own layers; drop \['router'\]"),
        ({"stack": "slosh"}, r"^policies\.stack: unknown stack 'slosh' \(did you mean 'slosched'\?\)"),
        (
            {"stack": "slosched", "stack_params": {"alpha": 1}},
            r"^policies\.stack_params\.alpha: unknown parameter 'alpha' of stack 'slosched'",
        ),
    ],
)
def test_bad_stack_configs_name_the_field(fields: dict[str, object], message: str) -> None:
    backends = [{"name": "a", "url": "http://127.0.0.1:9"}]
    with pytest.raises(ConfigError, match=message):
        parse_config({"backends": backends, "policies": fields})


def test_up_writes_the_stack_or_the_pair() -> None:
    assert gateway_policies("slosched") == {"stack": "slosched"}
    assert gateway_policies("prism+lens") == {"router": "prism", "engine": "lens", "job": "deadline"}
    with pytest.raises(ConfigError, match="ROUTER\\+ENGINE"):
        gateway_policies("nonsense")


def test_the_gateway_serves_deadline_calls_with_the_stack() -> None:
    async def scenario() -> None:
        async with (
            harness(policies={"stack": "slosched"}) as h,
            httpx.AsyncClient(base_url=h.url, timeout=10.0) as client,
        ):
            bodies = [{"prompt": f"q{i}", "max_tokens": 4} for i in range(6)]
            headers = {"x-slo-deadline-ms": "3000"}
            answers = await asyncio.gather(*(client.post("/v1/completions", json=b, headers=headers) for b in bodies))
            assert [r.status_code for r in answers] == [200] * 6
            assert h.value("slosched:requests_total", outcome="completed", reason="ok") == 6

    asyncio.run(scenario())
