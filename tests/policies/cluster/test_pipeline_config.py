"""Router ``pipeline``: a profile from configuration, and errors that name the field and the choices."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.perf.linear import LinearStepPredictor
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pipeline import Profile
from slosched.policies.registry import PolicyContext
from slosched.sim.views import InstanceSnapshot
from tests.conftest import make_instance

SPECS = tuple(make_instance(f"i{i}") for i in range(3))


def _context() -> PolicyContext:
    return PolicyContext(SPECS, np.random.default_rng(0), HistoryOutputPredictor())


def _view(index: int, prefill: int, free_blocks: int = 1000) -> InstanceSnapshot:
    return InstanceSnapshot(index, SPECS[index], 0.0, 0, 0, prefill, 0.0, free_blocks, 1000, LinearStepPredictor())


def _request(session: str | None = None, prompt: int = 100) -> Request:
    return Request("r", "j", "s", "t", prompt, 64, 0.0, 0.0, session_id=session, predicted_output_tokens=50.0)


def test_a_configured_profile_filters_scores_and_picks() -> None:
    params = {
        "filters": ["kv-fits"],
        "scorers": [{"name": "least-tokens", "weight": 1}, {"name": "session-affinity", "weight": 2}],
        "picker": {"name": "max", "params": {"combine": "sum"}},
    }
    router = ROUTERS.build("pipeline", params, _context())
    assert isinstance(router, Profile)
    views = [_view(0, 500), _view(1, 10, free_blocks=0), _view(2, 100)]
    assert router.route(_request("s"), views, 0.0) == 2  # 1 is lighter but its KV is full
    views = [_view(0, 0), _view(1, 10), _view(2, 300)]
    assert router.route(_request("s"), views, 0.0) == 2  # the session's home outweighs the load
    assert router.route(_request(), views, 0.0) == 0


def test_the_kv_filter_keeps_everyone_when_nothing_fits() -> None:
    router = ROUTERS.build("pipeline", {"filters": ["kv-fits"], "scorers": ["least-tokens"]}, _context())
    assert router.route(_request(prompt=10**6), [_view(0, 50), _view(1, 5)], 0.0) == 1


def test_random_and_sample_pickers_are_seeded() -> None:
    views = [_view(i, 100 * i) for i in range(3)]
    for picker in ("random", {"name": "sample", "params": {"choices": 2}}):
        params: dict[str, Any] = {"picker": picker, "scorers": [] if picker == "random" else ["least-tokens"]}
        picks = [[ROUTERS.build("pipeline", params, _context()).route(_request(), views, 0.0)] for _ in range(2)]
        assert picks[0] == picks[1]


@pytest.mark.parametrize(
    ("params", "field", "allowed"),
    [
        ({"scorers": ["nope"]}, "pipeline.scorers[0].name", "least-tokens"),
        ({"filters": [{"name": "nope"}], "scorers": ["least-tokens"]}, "pipeline.filters[0].name", "kv-fits"),
        ({"scorers": ["least-tokens"], "picker": "best"}, "pipeline.picker.name", "sample"),
        ({"scorers": [{"name": "least-tokens", "wieght": 1}]}, "pipeline.scorers[0]", "weight"),
        ({"scorers": [{"name": "least-tokens", "weight": -1}]}, "pipeline.scorers[0].weight", ">= 0"),
        ({"scorers": ["least-tokens"], "picker": {"name": "max", "params": {"relax": ["x"]}}}, "relax", "least-tokens"),
        ({"scorers": ["least-tokens"], "picker": {"name": "max", "params": {"combine": "mean"}}}, "combine", "product"),
        ({"scorers": [{"name": "least-loaded", "params": {"tie_break": "x"}}]}, "tie_break", "tokens"),
        ({"scorers": []}, "pipeline.scorers", "least-tokens"),
        ({"scorer": []}, "pipeline parameters", "scorers"),
    ],
)
def test_errors_name_the_field_and_the_allowed_values(params: dict[str, Any], field: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as error:
        ROUTERS.build("pipeline", params, _context())
    assert field in str(error.value) and allowed in str(error.value)
