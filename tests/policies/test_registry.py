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
