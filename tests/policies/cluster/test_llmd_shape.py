"""A ``pipeline`` profile in llm-d's ``EndpointPickerConfig`` shape (``routers/llmd_shape.py``): it builds the
same router as slosched's own shape, and every mistake names its field and the allowed values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import yaml

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.perf.linear import LinearStepPredictor
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.routers.llmd_shape import LLMD_TYPES, translate
from slosched.policies.registry import PolicyContext
from slosched.sim.views import InstanceSnapshot
from tests.conftest import make_instance

SPECS = tuple(make_instance(f"i{i}") for i in range(3))

# llm-d's own example config (the scheduling part, with the runtime plugins a real one carries).
LLMD = yaml.safe_load(
    """
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
  - type: single-profile-handler
  - type: queue-scorer
  - type: kv-cache-utilization-scorer
  - type: prefix-cache-scorer
    parameters: {hashBlockSize: 5, maxPrefixBlocksToMatch: 256, lruCapacityPerServer: 31250}
  - {type: session-affinity, name: sessions}
  - type: max-score-picker
schedulingProfiles:
  - name: default
    plugins:
      - {pluginRef: prefix-cache-scorer}
      - {pluginRef: queue-scorer, weight: 2}
      - {pluginRef: kv-cache-utilization-scorer}
      - {pluginRef: sessions, weight: 3}
      - {pluginRef: max-score-picker}
"""
)
OWN = {
    "filters": [{"name": "cache-affinity", "params": {}}],
    "scorers": [
        {"name": "least-loaded", "params": {}, "weight": 2},
        {"name": "prism-kv", "params": {}, "weight": 1},
        {"name": "session-affinity", "params": {}, "weight": 3},
    ],
    "picker": {"name": "max", "params": {}},
}


def _context() -> PolicyContext:
    return PolicyContext(SPECS, np.random.default_rng(0), HistoryOutputPredictor())


def _view(index: int, prefill: int, free_blocks: int = 1000) -> InstanceSnapshot:
    return InstanceSnapshot(index, SPECS[index], 0.0, 0, 0, prefill, 0.0, free_blocks, 1000, LinearStepPredictor())


def test_llmd_config_translates_to_the_own_shape() -> None:
    filters, scorers, picker = translate(LLMD["plugins"], LLMD["schedulingProfiles"])
    assert (filters, scorers, picker) == (OWN["filters"], OWN["scorers"], OWN["picker"])
    assert set(LLMD_TYPES) >= {"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer", "max-score-picker"}


def test_both_shapes_route_alike() -> None:
    pasted = ROUTERS.build("pipeline", LLMD, _context())
    own = ROUTERS.build("pipeline", OWN, _context())
    for prefills, free in (((500, 10, 100), (1000, 1000, 1000)), ((0, 10, 300), (10, 1000, 1000))):
        views = [_view(i, prefill, blocks) for i, (prefill, blocks) in enumerate(zip(prefills, free, strict=True))]
        for session in (None, "s"):
            request = Request("r", "j", "s", "t", 100, 64, 0.0, 0.0, session_id=session, predicted_output_tokens=50.0)
            assert pasted.route(request, views, 0.0) == own.route(request, views, 0.0)


def _with(**changes: Any) -> dict[str, Any]:
    return {"plugins": LLMD["plugins"], "schedulingProfiles": LLMD["schedulingProfiles"], **changes}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (_with(plugins=[{"type": "queue-scorrer"}]), r"pipeline\.schedulingProfiles\[0\]\.plugins\[0\]\.pluginRef"),
        (
            _with(
                plugins=[{"type": "queue-scorrer"}], schedulingProfiles=[{"plugins": [{"pluginRef": "queue-scorrer"}]}]
            ),
            r"queue-scorrer.*did you mean 'queue-scorer'",
        ),
        (_with(schedulingProfiles=[{"name": "a"}, {"name": "b"}]), r"exactly one profile.*got 2"),
        (
            _with(schedulingProfiles=[{"plugins": [{"pluginRef": "max-score-picker", "weight": 2}]}]),
            r"only scorers take a weight; 'max-score-picker' is a picker",
        ),
        (_with(plugins=[{"type": "queue-scorer"}, {"type": "queue-scorer"}]), r"'queue-scorer' is defined twice"),
        (_with(scorers=["least-tokens"]), r"not both"),
        (_with(plugins=[{"type": "queue-scorer", "params": {}}]), r"plugins\[0\].*unknown keys \['params'\]"),
    ],
)
def test_mistakes_name_their_field(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ROUTERS.build("pipeline", params, _context())


def test_a_scenario_check_names_a_wrong_stage_before_any_run() -> None:
    from slosched.scenario.validation import policy_param_problems

    broken = _with(
        plugins=[*LLMD["plugins"][:1], {"type": "queue-scorrer", "name": "queue-scorer"}, *LLMD["plugins"][2:]]
    )
    problems = policy_param_problems({"policy_params": {"router": {"pipeline": broken}}})
    assert [problem.field for problem in problems] == [
        "policy_params.router.pipeline.schedulingProfiles[0].plugins[1] (type)"
    ]
    assert "did you mean 'queue-scorer'" in problems[0].message
    own = {"scorers": ["least-tokens", {"name": "least-tokenz", "weight": 1}]}
    problems = policy_param_problems({"policy_params": {"router": {"pipeline": own}}})
    assert [problem.field for problem in problems] == ["policy_params.router.pipeline.scorers[1].name"]
    assert policy_param_problems({"policy_params": {"router": {"pipeline": LLMD}}}) == []
