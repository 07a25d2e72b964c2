from typing import Any

import numpy as np
import pytest

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.engine.base import ENGINE_PRESETS
from slosched.policies.registry import PolicyContext
from slosched.sim.runner import PolicyPair


def _context() -> PolicyContext:
    return PolicyContext(instances=(), rng=np.random.default_rng(0), output_predictor=HistoryOutputPredictor())


def test_baselines_are_registered() -> None:
    assert {"round-robin", "random", "least-loaded", "least-tokens"} <= set(ROUTERS.names())
    assert {"fcfs", "chunked-fcfs", "static-priority"} <= set(ENGINE_PRESETS.names())


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(UnknownNameError) as error:
        ROUTERS.build("fastest", {}, _context())
    assert "round-robin" in str(error.value) and "fastest" in str(error.value)
    with pytest.raises(UnknownNameError, match="chunked-fcfs"):
        PolicyPair.parse("round-robin+fifo")


def test_policy_pairs_must_have_both_parts() -> None:
    with pytest.raises(ConfigError, match="ROUTER\\+ENGINE"):
        PolicyPair.parse("round-robin")


def test_unknown_and_bad_parameters_are_named() -> None:
    with pytest.raises(
        ConfigError, match="unknown parameter 'budget' \\(did you mean 'token_budget'\\?\\); allowed: token_budget"
    ):
        ENGINE_PRESETS.build("chunked-fcfs", {"budget": 5}, _context())
    with pytest.raises(ConfigError, match="token_budget"):
        ENGINE_PRESETS.build("chunked-fcfs", {"token_budget": "lots"}, _context())
    with pytest.raises(ConfigError, match="must be >= 1"):
        ENGINE_PRESETS.build("chunked-fcfs", {"token_budget": 0}, _context())


def test_parameters_are_checked_against_the_declared_dataclass() -> None:
    with pytest.raises(ConfigError, match=r"lens\.tolerance: expected float, got 'x'"):
        ENGINE_PRESETS.build("lens", {"tolerance": "x"}, _context())
    with pytest.raises(ConfigError, match=r"did you mean 'best_effort_share'"):
        ENGINE_PRESETS.build("deadline-triage", {"best_effort_shares": 0.5}, _context())
    with pytest.raises(ConfigError, match=r"deadline-triage\.triage: expected bool, got 1"):
        ENGINE_PRESETS.build("deadline-triage", {"triage": 1}, _context())
    built = ENGINE_PRESETS.build("lens", {"tolerance": 0.1, "iterations": 12.0, "ttft_slo_s": 2}, _context())
    lens: Any = built.batching
    assert (lens.tolerance, lens.iterations, lens.ttft_slo_s) == (0.1, 12, 2.0)


def test_old_names_are_aliases_of_the_renamed_policies() -> None:
    assert "slosched" in ROUTERS and ROUTERS.canonical("slosched") == "deadline-completion"
    assert ROUTERS.aliases_of("deadline-completion") == ["slosched"]
    assert "slosched" in ROUTERS.names() and "slosched" not in ROUTERS.registered()
    old: Any = ENGINE_PRESETS.build("slosched", {"token_budget": 256}, _context()).batching
    new: Any = ENGINE_PRESETS.build("deadline-triage", {"token_budget": 256}, _context()).batching
    assert type(old) is type(new) and old.token_budget == new.token_budget == 256
