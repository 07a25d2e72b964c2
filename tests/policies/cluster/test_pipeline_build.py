"""``policies.cluster.pipeline_config`` directly: ``build_scorers`` and ``build_profile`` turn names and
mappings into a ``Profile`` (stages in order, weights kept) and name the field of every malformed entry.
(``test_pipeline_config.py`` covers routing decisions and the registry's unknown-name errors.)"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.pickers import MaxPicker, SamplePicker
from slosched.policies.cluster.pipeline import Profile
from slosched.policies.cluster.routers.pipeline import build, build_profile, build_scorers
from slosched.policies.registry import PolicyContext
from tests.conftest import make_instance


def make_context() -> PolicyContext:
    return PolicyContext((make_instance("a"), make_instance("b")), np.random.default_rng(0), HistoryOutputPredictor())


def test_scorers_keep_names_weights_and_order() -> None:
    scorers = build_scorers(["least-tokens", {"name": "session-affinity", "weight": 2}], make_context())
    assert [(s.name, s.weight) for s in scorers] == [("least-tokens", 1.0), ("session-affinity", 2.0)]
    assert all(isinstance(s.weight, float) for s in scorers)
    assert build_scorers([{"name": "least-tokens", "weight": 0}], make_context())[0].weight == 0.0


def test_profile_from_names_and_mappings() -> None:
    params = {
        "filters": [{"name": "kv-fits"}],
        "scorers": [{"name": "least-tokens", "weight": 0.5}],
        "picker": {"name": "sample", "params": {"choices": 3}},
    }
    profile = build_profile(params, make_context())
    assert isinstance(profile, Profile)
    assert len(profile.filters) == 1 and [s.name for s in profile.scorers] == ["least-tokens"]
    assert isinstance(profile.picker, SamplePicker) and profile.picker.choices == 3
    default = build({"scorers": ["least-tokens"]}, make_context())
    assert isinstance(default, Profile)
    assert default.filters == () and isinstance(default.picker, MaxPicker)
    relaxed = build_profile(
        {"scorers": ["least-tokens"], "picker": {"name": "max", "params": {"relax": ["least-tokens"]}}}, make_context()
    )
    assert isinstance(relaxed.picker, MaxPicker) and relaxed.picker.relax == ("least-tokens",)
    assert build_profile({"picker": "random"}, make_context()).scorers == ()  # random needs no scorer


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"scorers": "least-tokens"}, "pipeline.scorers: expected list"),
        ({"filters": {"name": "kv-fits"}, "scorers": ["least-tokens"]}, "pipeline.filters: expected list"),
        ({"scorers": [3]}, "pipeline.scorers[0]: expected a name or a mapping"),
        ({"scorers": [{"weight": 1}]}, "pipeline.scorers[0].name: expected a name, got None"),
        ({"scorers": [{"name": "least-tokens", "params": [1]}]}, "pipeline.scorers[0].params: expected a mapping"),
        ({"scorers": [{"name": "least-tokens", "weight": True}]}, "pipeline.scorers[0].weight: expected a finite"),
        ({"scorers": [{"name": "least-tokens", "weight": float("inf")}]}, "pipeline.scorers[0].weight"),
        (
            {"scorers": ["least-tokens", {"name": "least-tokens"}]},
            "pipeline.scorers[1].name: scorer 'least-tokens' listed twice",
        ),
        (
            {"filters": [{"name": "kv-fits", "weight": 1}], "scorers": ["least-tokens"]},
            "pipeline.filters[0]: unknown keys ['weight']",
        ),
        (
            {"scorers": ["least-tokens"], "picker": {"name": "max", "extra": 1}},
            "pipeline.picker: unknown keys ['extra']",
        ),
        ({"picker": "sample"}, "pipeline.scorers: picker 'sample' needs at least one scorer"),
    ],
)
def test_malformed_entries_name_their_field(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        build_profile(params, make_context())
    assert message in str(error.value)
