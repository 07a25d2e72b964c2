"""Plugin configuration: which engine policy runs and where the plugin publishes and listens.

Read once at start-up from ``$SLOSCHED_ENGINE_CONFIG`` (a JSON object, or the path of a JSON file) and
``$SLOSCHED_ENGINE_POLICY`` (an engine in text form: a preset name, shorthand for ``{"preset": NAME}``, or
``ORDERING/ADMISSION/BATCHING``); a scheduler class may
supply defaults (``UrgencyScheduler`` -> preset ``urgency``). The control file (``control.py``) later
overrides any of these keys at run time. Keys (all optional):

- ``preset`` (an ``ENGINE_PRESETS`` name) with ``params``; or ``ordering`` / ``admission`` / ``batching``
  (registry names, defaults ``fcfs`` / ``always`` / ``chunked``) with ``ordering_params`` /
  ``admission_params`` / ``params`` (batching). ``preset`` wins when both are given. This is the mapping
  spelling of ``policies.engine.spec.EngineSpec``, the engine half of the builder the simulator and the
  gateway use too; names are checked at load.
- ``bypass`` (false): stock vLLM scheduling; the plugin only measures steps and exports state.
- ``drain`` (false): admit nothing (running requests finish; waiting ones wait).
- ``mode_override`` (none): force every step's mode (``mixed``, ``prefill_first``, ``decode_only``,
  ``prefill_only``) over the policy's plan, keeping its budget and cap (operations and tests).
- ``state_file`` (none) and ``export_interval_s`` (0.5): where and how often the state JSON is written.
- ``control_file`` (none) and ``control_poll_s`` (0.25): the runtime control file and its poll period.
- ``step_log_file`` (none): a JSON line per step (plan applied, tokens scheduled) for debugging and tests.
- ``step_timing_file`` (none): a JSON line per completed step, its shape and when the model step ended and
  how long it ran (``perf_counter`` seconds), from which ``fidelity.step_log`` builds measured steps.
- ``speed_probe_interval_s`` (0: off): with ``step_timing_file``, every this many seconds (between steps)
  the engine times a fixed CPU workload (``perf.speed_probe``) and writes it to the timing file: how fast
  the host runs the engine's core then (``bench fidelity`` simulates each replay at that speed).
- ``observe_interval_s`` (2.0): how often measured steps are handed to the policy's step observers.
- ``seed`` (0): the policies' RNG seed.
- ``fair_share`` (none): fair sharing of the engine's slots across tenants, the simulator's and the gateway's
  mechanism (``policies/fairness``): ``{tenants: {NAME: {weight, band}}, default_weight, max_wait_s}``; a
  request's tenant is the one its metadata names (``metadata.py``). ``null`` turns it off.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.views import StepMode
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.engine.base import EnginePolicy
from slosched.policies.engine.spec import MAPPING_KEYS, EngineSpec
from slosched.policies.fairness.spec import FairShareSpec
from slosched.policies.registry import PolicyContext
from slosched.policies.spec import PolicySpec

CONFIG_ENV = "SLOSCHED_ENGINE_CONFIG"
POLICY_ENV = "SLOSCHED_ENGINE_POLICY"
POLICY_KEYS = MAPPING_KEYS
_KEYS = {
    *POLICY_KEYS,
    "bypass",
    "drain",
    "mode_override",
    "state_file",
    "export_interval_s",
    "control_file",
    "control_poll_s",
    "step_log_file",
    "step_timing_file",
    "speed_probe_interval_s",
    "observe_interval_s",
    "seed",
    "version",
    "fair_share",
}


# The plugin's name for the engine half of a PolicySpec (kept: saber_speed and the engine use it).
PolicyChoice = EngineSpec


@dataclass(slots=True, frozen=True)
class PluginConfig:
    policy: PolicyChoice = field(default_factory=PolicyChoice)
    bypass: bool = False
    drain: bool = False
    mode_override: StepMode | None = None
    state_file: Path | None = None
    export_interval_s: float = 0.5
    control_file: Path | None = None
    control_poll_s: float = 0.25
    step_log_file: Path | None = None
    step_timing_file: Path | None = None
    speed_probe_interval_s: float = 0.0
    observe_interval_s: float = 2.0
    seed: int = 0
    fair_share: FairShareSpec | None = None


def _number(data: Mapping[str, Any], key: str, default: float) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"slosched engine config.{key}", f"expected a number > 0, got {value!r}")
    return float(value)


def _non_negative(data: Mapping[str, Any], key: str, default: float) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"slosched engine config.{key}", f"expected a number >= 0 (0: off), got {value!r}")
    return float(value)


def _flag(data: Mapping[str, Any], key: str, default: bool) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"slosched engine config.{key}", f"expected true or false, got {value!r}")
    return value


def _path(data: Mapping[str, Any], key: str, default: Path | None) -> Path | None:
    value = data.get(key, default)
    if value is None or isinstance(value, Path):
        return value
    if not isinstance(value, str) or not value:
        raise ConfigError(f"slosched engine config.{key}", f"expected a file path, got {value!r}")
    return Path(value)


def _mode(data: Mapping[str, Any], default: StepMode | None) -> StepMode | None:
    if "mode_override" not in data:
        return default
    value = data["mode_override"]
    if value is None:
        return None
    allowed = [mode.value for mode in StepMode]
    if value not in allowed:
        raise ConfigError("slosched engine config.mode_override", f"got {value!r}; allowed: {allowed} or null")
    return StepMode(value)


def _fair_share(data: Mapping[str, Any], default: FairShareSpec | None) -> FairShareSpec | None:
    if "fair_share" not in data:
        return default
    value = data["fair_share"]
    return None if value is None else FairShareSpec.from_mapping(value, "slosched engine config.fair_share")


def policy_choice(data: Mapping[str, Any], base: PolicyChoice | None = None) -> PolicyChoice:
    """The policy named in ``data``; without any policy key, ``base`` (or the FCFS default)."""
    if not any(key in data for key in POLICY_KEYS):
        return base or PolicyChoice()
    return EngineSpec.from_mapping({key: data[key] for key in POLICY_KEYS if key in data}, "slosched engine config")


def config_from_mapping(data: Mapping[str, Any], base: PluginConfig | None = None) -> PluginConfig:
    """``data``'s keys over ``base`` (default: all defaults); unknown keys fail, naming the allowed ones."""
    unknown = set(data) - _KEYS
    if unknown:
        raise ConfigError("slosched engine config", f"unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}")
    base = base or PluginConfig()
    return replace(
        base,
        policy=policy_choice(data, base.policy),
        bypass=_flag(data, "bypass", base.bypass),
        drain=_flag(data, "drain", base.drain),
        mode_override=_mode(data, base.mode_override),
        state_file=_path(data, "state_file", base.state_file),
        export_interval_s=_number(data, "export_interval_s", base.export_interval_s),
        control_file=_path(data, "control_file", base.control_file),
        control_poll_s=_number(data, "control_poll_s", base.control_poll_s),
        step_log_file=_path(data, "step_log_file", base.step_log_file),
        step_timing_file=_path(data, "step_timing_file", base.step_timing_file),
        speed_probe_interval_s=_non_negative(data, "speed_probe_interval_s", base.speed_probe_interval_s),
        observe_interval_s=_number(data, "observe_interval_s", base.observe_interval_s),
        seed=int(data.get("seed", base.seed)),
        fair_share=_fair_share(data, base.fair_share),
    )


def load_json_object(text: str, source: str) -> dict[str, Any]:
    """``text`` is a JSON object, or the path of a file holding one."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        try:
            stripped = Path(stripped).read_text()
        except OSError as error:
            raise ConfigError(source, f"neither a JSON object nor a readable file: {error}") from None
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError as error:
        raise ConfigError(source, f"not JSON: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(source, "expected a JSON object")
    return data


def config_from_env(defaults: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> PluginConfig:
    """Class defaults, then ``$SLOSCHED_ENGINE_POLICY``, then ``$SLOSCHED_ENGINE_CONFIG`` (later wins)."""
    env = os.environ if env is None else env
    config = config_from_mapping(defaults or {})
    if env.get(POLICY_ENV):
        config = replace(config, policy=EngineSpec.parse(env[POLICY_ENV], field_name=f"${POLICY_ENV}"))
    if env.get(CONFIG_ENV):
        config = config_from_mapping(load_json_object(env[CONFIG_ENV], f"${CONFIG_ENV}"), config)
    return config


def build_policy(
    choice: PolicyChoice, spec: InstanceSpec, seed: int, fair_share: FairShareSpec | None = None
) -> EnginePolicy:
    """Fresh policy objects for one engine (policies are stateful), sharing slots fairly under ``fair_share``
    when given; bad names/params raise ConfigError."""
    context = PolicyContext((spec,), np.random.default_rng(seed), HistoryOutputPredictor())
    return PolicySpec(engine=choice, fair_share=fair_share).build(context).new_engine()
