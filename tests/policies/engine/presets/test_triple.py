"""``policies.engine.presets`` (``triple.py`` and one file per preset): every triple preset is registered
and built from exactly its three parts; parameters go to the batching part."""

from __future__ import annotations

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.engine.base import ADMISSIONS, BATCHINGS, ENGINE_PRESETS, ORDERINGS, EnginePolicy
from slosched.policies.engine.batching.chunked import StaticBatching
from slosched.policies.engine.presets.triple import compose
from slosched.policies.registry import PolicyContext
from tests.conftest import make_instance

# name -> (ordering, admission, batching), as each preset's file composes them
TRIPLES = {
    "fcfs": ("fcfs", "always", "prefill-first"),
    "chunked-fcfs": ("fcfs", "always", "chunked"),
    "static-priority": ("static-priority", "always", "chunked"),
    "urgency": ("urgency", "always", "prefill-first"),
    "lens": ("fcfs", "always", "lens"),
}


def make_context() -> PolicyContext:
    return PolicyContext((make_instance("i0"),), np.random.default_rng(0), HistoryOutputPredictor())


def test_the_documented_presets_are_registered() -> None:
    assert set(TRIPLES) <= set(ENGINE_PRESETS.names())


@pytest.mark.parametrize("name", sorted(TRIPLES))
def test_each_preset_is_its_triple(name: str) -> None:
    ordering, admission, batching = TRIPLES[name]
    context = make_context()
    policy = ENGINE_PRESETS.build(name, {}, context)
    assert isinstance(policy, EnginePolicy) and policy.name == name
    assert type(policy.ordering) is type(ORDERINGS.build(ordering, {}, context))
    assert type(policy.admission) is type(ADMISSIONS.build(admission, {}, context))
    assert type(policy.batching) is type(BATCHINGS.build(batching, {}, context))


def test_chunked_and_prefill_first_differ_in_their_step_mode() -> None:
    context = make_context()
    fcfs = ENGINE_PRESETS.build("fcfs", {}, context).batching
    chunked = ENGINE_PRESETS.build("chunked-fcfs", {}, context).batching
    assert isinstance(fcfs, StaticBatching) and isinstance(chunked, StaticBatching)
    assert (fcfs.chunked_prefill, chunked.chunked_prefill) == (False, True)
    assert fcfs.mode != chunked.mode


def test_parameters_go_to_the_batching_part() -> None:
    policy = compose("mine", "fcfs", "always", "chunked", {"token_budget": 256}, make_context())
    assert policy.name == "mine"
    assert isinstance(policy.batching, StaticBatching) and policy.batching.token_budget == 256
    default = ENGINE_PRESETS.build("chunked-fcfs", {}, make_context()).batching
    assert isinstance(default, StaticBatching) and default.token_budget is None  # the instance's limit
    with pytest.raises(ConfigError, match="token_budget"):
        ENGINE_PRESETS.build("chunked-fcfs", {"token_budget": 0}, make_context())
    with pytest.raises(ConfigError):
        ENGINE_PRESETS.build("fcfs", {"window": 3}, make_context())


def test_each_build_has_its_own_parts() -> None:
    context = make_context()
    first, second = (ENGINE_PRESETS.build("static-priority", {}, context) for _ in range(2))
    assert first.ordering is not second.ordering  # per-instance state (fixed keys) is never shared
