"""The engine state as Prometheus gauges on vLLM's own ``/metrics``: how PRISM's ``s_e`` reaches the gateway.

vLLM runs the plugin in its EngineCore process, while ``/metrics`` is served by the API server process
from prometheus-client's default registry; a gauge set inside EngineCore never appears there (vLLM
carries its own engine metrics across in ``SchedulerStats`` messages, which have no room for ours). So
the plugin's ``StateWriter`` keeps writing the state file in EngineCore, and this module, loaded in the
API server as a vLLM *general plugin* (entry point ``vllm.general_plugins``: ``slosched_state``, which
vLLM runs in every process it starts), registers a collector that reads that file on each scrape.
Both processes are on one host (EngineCore is the API server's child) and inherit
``$SLOSCHED_ENGINE_CONFIG``, which names the file.

Gauges (no labels; absent while the file is missing, e.g. before the engine's first step, or unreadable,
so a scraper falls back):

- ``slosched:engine_latency_seconds`` L_e, ``slosched:engine_pending_prefill_tokens`` and
  ``slosched:engine_pending_requests`` W_e, ``slosched:engine_free_kv_tokens`` M_e,
  ``slosched:engine_peak_tokens_per_second`` Pmax_e (``+Inf`` while the step model is unfitted);
- ``slosched:engine_state_snapshot_unix_seconds``: when the engine computed the state (its clock);
- ``slosched:engine_state_age_seconds``: how old the information is at this scrape, measured on the
  engine's host (so a gateway elsewhere needs no synchronised clock): seconds since the snapshot while
  the engine has work, seconds since the writer's heartbeat while it is idle. An idle engine publishes a
  snapshot as it goes idle and a new one at its first step after, so its idle snapshot stays true for as
  long as the writer thread (the heartbeat) is alive; a busy one is only as fresh as its last snapshot;
- ``slosched:engine_state_heartbeat_age_seconds``: seconds since the writer thread last wrote.

Limits: with ``--api-server-count`` > 1 vLLM serves a multiprocess registry instead of the default
one, so these gauges are absent (the gateway then routes on its own estimates); ``$VLLM_PLUGINS``, when
set, must name ``slosched_state``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from slosched.core.errors import ConfigError
from slosched.policies.engine import nexus_state as keys
from slosched.vllm_ext.config import CONFIG_ENV, load_json_object
from slosched.vllm_ext.state_export import read_state

log = logging.getLogger("slosched.vllm_ext")

# s_e key in the state file -> (gauge name, help). The gateway parses exactly these names.
STATE_GAUGES: dict[str, tuple[str, str]] = {
    keys.LATENCY: ("slosched:engine_latency_seconds", "L_e: predicted duration of the engine's next step"),
    keys.PENDING_PREFILL: ("slosched:engine_pending_prefill_tokens", "W_e: prefill tokens not yet computed"),
    keys.PENDING_REQUESTS: ("slosched:engine_pending_requests", "W_e: requests queued or running"),
    keys.FREE_KV: ("slosched:engine_free_kv_tokens", "M_e: free KV tokens minus what queued requests claim"),
    keys.PEAK: ("slosched:engine_peak_tokens_per_second", "Pmax_e: peak throughput, +Inf while unfitted"),
}
SNAPSHOT_GAUGE = "slosched:engine_state_snapshot_unix_seconds"
AGE_GAUGE = "slosched:engine_state_age_seconds"
HEARTBEAT_AGE_GAUGE = "slosched:engine_state_heartbeat_age_seconds"
GAUGE_NAMES = (*(name for name, _ in STATE_GAUGES.values()), SNAPSHOT_GAUGE, AGE_GAUGE, HEARTBEAT_AGE_GAUGE)
_EXTRA_HELP = {
    SNAPSHOT_GAUGE: "Unix time at which the engine computed its exported state",
    AGE_GAUGE: "Seconds since the exported state was last known current (snapshot if busy, heartbeat if idle)",
    HEARTBEAT_AGE_GAUGE: "Seconds since the plugin's state writer last wrote",
}


def _number(value: Any, default: float | None = None) -> float | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return float(value)


def state_gauges(state: Mapping[str, Any]) -> dict[str, float] | None:
    """Gauge name -> value for a ``read_state`` document; None unless every ``s_e`` field is a number
    (a reader needs all five; half a state would be scored as if the rest were zero)."""
    values: dict[str, float] = {}
    for key, (name, _) in STATE_GAUGES.items():
        value = _number(state.get(key), math.inf if key == keys.PEAK else None)  # JSON null peak: unknown
        if value is None:
            return None
        values[name] = value
    snapshot_age = _number(state.get("age_s"))
    heartbeat_age = _number(state.get("heartbeat_age_s"))
    snapshot = _number(state.get("snapshot_unix_s"))
    if snapshot_age is None or heartbeat_age is None or snapshot is None:
        return None
    idle = values[STATE_GAUGES[keys.PENDING_REQUESTS][0]] == 0
    values[SNAPSHOT_GAUGE] = snapshot
    values[AGE_GAUGE] = max(heartbeat_age if idle else snapshot_age, 0.0)
    values[HEARTBEAT_AGE_GAUGE] = max(heartbeat_age, 0.0)
    return values


def _help(name: str) -> str:
    for gauge, text in STATE_GAUGES.values():
        if gauge == name:
            return text
    return _EXTRA_HELP[name]


class EngineStateCollector:
    """prometheus-client collector: the state file as gauges, read at every scrape (a ~2 KB JSON file)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def describe(self) -> Iterator[GaugeMetricFamily]:
        # Names without samples: lets the registry detect a second registration without reading the file.
        for name in GAUGE_NAMES:
            yield GaugeMetricFamily(name, _help(name))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        state = read_state(self.path)
        values = None if state is None else state_gauges(state)
        if values is None:
            return
        for name, value in values.items():
            yield GaugeMetricFamily(name, _help(name), value=value)


def state_file_from_env(env: Mapping[str, str] | None = None) -> Path | None:
    """The plugin's ``state_file`` from ``$SLOSCHED_ENGINE_CONFIG`` (the only key read here: the policy
    part is EngineCore's business, checked when it builds the scheduler)."""
    text = (os.environ if env is None else env).get(CONFIG_ENV)
    if not text:
        return None
    path = load_json_object(text, f"${CONFIG_ENV}").get("state_file")
    if path is None:
        return None
    if not isinstance(path, str) or not path:
        raise ConfigError(f"${CONFIG_ENV}.state_file", f"expected a file path, got {path!r}")
    return Path(path)


def register(env: Mapping[str, str] | None = None, registry: CollectorRegistry | None = None) -> bool:
    """The ``vllm.general_plugins`` entry point: register the collector when a state file is configured.
    Safe to call in any process and more than once (vLLM loads general plugins in each of its processes);
    True when this call registered it. A bad configuration is logged, not raised: EngineCore reports it
    when it builds the scheduler, with a better message than a plugin loader could."""
    try:
        path = state_file_from_env(env)
    except ConfigError as error:
        log.warning("slosched state gauges disabled: %s", error)
        return False
    if path is None:
        return False
    try:
        (REGISTRY if registry is None else registry).register(EngineStateCollector(path))
    except ValueError:  # already registered in this process
        return False
    return True
