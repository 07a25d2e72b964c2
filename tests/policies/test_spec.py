"""The shared builder: PolicySpec -> PolicySet, engines by parts without a preset, errors that name the field
and the allowed values, and the same objects from the simulator's, the gateway's and the plugin's spelling."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.gateway.ops.config import PolicyConfig
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.engine.spec import EngineSpec
from slosched.policies.registry import PolicyContext
from slosched.policies.spec import PolicyPair, PolicyParams, PolicySpec
from slosched.sim.options import SimOptions
from slosched.sim.runner import simulate
from slosched.vllm_ext.config import build_policy, config_from_env, config_from_mapping
from tests.conftest import make_cluster, make_instance, make_jobs


def _context(num_instances: int = 2) -> PolicyContext:
    instances = tuple(make_instance(f"i{i}") for i in range(num_instances))
    return PolicyContext(instances, np.random.default_rng(0), HistoryOutputPredictor())


def _part_types(spec: EngineSpec) -> tuple[type, type, type]:
    engine = spec.build(_context())
    return type(engine.ordering), type(engine.admission), type(engine.batching)


def test_a_parts_engine_builds_the_same_parts_as_its_preset() -> None:
    parts = EngineSpec.parse("urgency/always/prefill-first")
    assert parts.name == "urgency/always/prefill-first" and parts.preset is None
    assert _part_types(parts) == _part_types(EngineSpec.parse("urgency"))
    assert _part_types(EngineSpec.parse("fcfs/always/chunked")) == _part_types(EngineSpec.parse("chunked-fcfs"))


def test_parts_take_per_part_parameters() -> None:
    spec = EngineSpec.parse("fcfs/always/chunked", {"batching": {"token_budget": 256}})
    assert spec.params == {"token_budget": 256}
    assert spec.build(_context()).batching.token_budget == 256  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"unknown keys \['token_budget'\]; allowed: \['ordering', 'admission'"):
        EngineSpec.parse("fcfs/always/chunked", {"token_budget": 256})
    with pytest.raises(ConfigError, match=r"chunked parameters: unknown parameter 'budget'"):
        EngineSpec.parse("fcfs/always/chunked", {"batching": {"budget": 1}}).build(_context())


def test_bad_engines_name_the_field_and_the_allowed_values() -> None:
    known = r"always, prefix-wait, saber"
    with pytest.raises(UnknownNameError, match=rf"engine\.admission: unknown name 'sometimes'.*{known}"):
        EngineSpec.parse("fcfs/sometimes/chunked")
    with pytest.raises(UnknownNameError, match=r"engine \(a preset, or ORDERING/ADMISSION/BATCHING\).*chunked-fcfs"):
        EngineSpec.parse("fifo")
    with pytest.raises(ConfigError, match="is not ORDERING/ADMISSION/BATCHING"):
        EngineSpec.parse("fcfs/always")
    with pytest.raises(ConfigError, match=r"unknown keys \['order'\]"):
        EngineSpec.from_mapping({"order": "fcfs"})
    with pytest.raises(UnknownNameError, match=r"engine\.ordering: unknown name 'lifo'.*urgency"):
        EngineSpec.from_mapping({"ordering": "lifo"})


def test_the_mapping_form_defaults_missing_parts() -> None:
    spec = EngineSpec.from_mapping(
        {"ordering": "urgency", "admission": "static-concurrency", "admission_params": {"cap": 4}}
    )
    assert spec.name == "urgency/static-concurrency/chunked"
    assert EngineSpec.from_mapping({"preset": "lens", "ordering": "urgency"}).name == "lens"  # preset wins


def test_policy_spec_from_text_looks_up_each_names_parameters() -> None:
    params = PolicyParams(
        router={"latency-lagging": {"window_s": 3.0}},
        engine={"fcfs/always/chunked": {"batching": {"token_budget": 128}}},
    )
    spec = PolicySpec.from_text("latency-lagging+fcfs/always/chunked", params, job="static-sum")
    assert spec.name == "latency-lagging+fcfs/always/chunked"
    assert spec.router_params == {"window_s": 3.0} and spec.engine.params == {"token_budget": 128}
    built = spec.build(_context())
    router, job = built.cluster_layer()
    assert type(router).__name__ == "LatencyLaggingRouter" and type(job).__name__ == "StaticSumPriority"
    first, second = built.engines(2)
    assert first is not second and first.name == second.name == "fcfs/always/chunked"
    assert built.output_predictor is built.context.output_predictor
    with pytest.raises(UnknownNameError, match="job policy"):
        PolicySpec.from_text("round-robin+fcfs", job="hurry")


def test_an_engine_only_spec_builds_no_router() -> None:
    built = PolicySpec(EngineSpec.parse("lens")).build(_context(1))
    assert built.router is None and built.new_engine().name == "lens"
    with pytest.raises(ConfigError, match="no router"):
        built.cluster_layer()


def test_policy_pairs_accept_parts_and_simulate_like_the_preset() -> None:
    """``chunked-fcfs`` is ``fcfs/always/chunked``: the runs differ in the policy's name only."""
    instances, jobs, options = make_cluster(1, 1), make_jobs(30, rate=6.0), SimOptions()
    preset = simulate(instances, jobs, PolicyPair.parse("least-tokens+chunked-fcfs"), 4, options)
    parts = simulate(instances, jobs, PolicyPair.parse("least-tokens+fcfs/always/chunked"), 4, options)
    assert parts.policy == "least-tokens+fcfs/always/chunked"
    assert replace(parts, policy=preset.policy) == preset


def test_the_three_runtimes_spell_one_engine_alike() -> None:
    """Gateway config, plugin config (mapping and env text) and scenario text give equal EngineSpecs."""
    text = EngineSpec.parse("urgency/always/chunked", {"batching": {"token_budget": 64}})
    gateway = PolicyConfig(engine="urgency/always/chunked", engine_params={"batching": {"token_budget": 64}}).spec()
    plugin = config_from_mapping({"ordering": "urgency", "params": {"token_budget": 64}}).policy
    assert gateway.engine == text == plugin
    env = config_from_env(env={"SLOSCHED_ENGINE_POLICY": "urgency/always/chunked"}).policy
    assert env == replace(text, params={})
    assert build_policy(plugin, make_instance(), 0).name == "urgency/always/chunked"
    with pytest.raises(
        ValueError, match=r"engine\.batching: unknown batching 'sliced'.*chunked, (deadline-budget, )?lens"
    ):
        PolicyConfig(engine="urgency/always/sliced")
