"""``policies.engine.saber_presets``: ``saber`` (SABER ordering + admission sharing one speed model, chunked
prefill) and ``static-concurrency`` (FCFS + a running cap), with their parameter checks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.engine.admission.saber_speed import SaberAdmission
from slosched.policies.engine.admission.static_concurrency import StaticConcurrencyAdmission
from slosched.policies.engine.base import ENGINE_PRESETS
from slosched.policies.engine.batching.chunked import StaticBatching
from slosched.policies.engine.ordering.saber_tiers import SaberOrdering
from slosched.policies.registry import PolicyContext
from tests.conftest import make_instance

SPEED = {"kind": "usl", "lam": 87.0, "sigma": 0.02, "kappa": 0.0001}


def make_context() -> PolicyContext:
    return PolicyContext((make_instance("i0"),), np.random.default_rng(0), HistoryOutputPredictor())


def test_saber_shares_one_speed_model_between_ordering_and_admission() -> None:
    policy = ENGINE_PRESETS.build(
        "saber", {"speed": SPEED, "window": 3, "scan": "queue", "token_budget": 512}, make_context()
    )
    assert policy.name == "saber"
    assert isinstance(policy.ordering, SaberOrdering) and isinstance(policy.admission, SaberAdmission)
    assert policy.ordering.model is policy.admission.model
    assert policy.ordering.window == policy.admission.window == 3
    assert policy.ordering.scan == policy.admission.scan == "queue"
    assert isinstance(policy.batching, StaticBatching)
    assert policy.batching.chunked_prefill and policy.batching.token_budget == 512


def test_saber_without_a_token_budget_uses_the_instance_limit() -> None:
    policy = ENGINE_PRESETS.build("saber", {"speed": SPEED}, make_context())
    assert isinstance(policy.batching, StaticBatching) and policy.batching.token_budget is None


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({}, "give exactly one"),
        ({"speed": SPEED, "wndow": 3}, "wndow"),
        ({"speed": SPEED, "scan": "sideways"}, "scan"),
    ],
)
def test_saber_parameter_errors(params: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ENGINE_PRESETS.build("saber", params, make_context())


def test_static_concurrency() -> None:
    policy = ENGINE_PRESETS.build("static-concurrency", {"cap": 3, "token_budget": 64}, make_context())
    assert policy.name == "static-concurrency"
    assert isinstance(policy.admission, StaticConcurrencyAdmission) and policy.admission.cap == 3
    assert isinstance(policy.batching, StaticBatching) and policy.batching.token_budget == 64
    for params, match in (({}, "required"), ({"cap": 0}, ">= 1"), ({"cap": 2, "window": 1}, "window")):
        with pytest.raises(ConfigError, match=match):
            ENGINE_PRESETS.build("static-concurrency", params, make_context())
