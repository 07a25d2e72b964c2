"""The vLLM plugin's exported engine state (PRISM's ``s_e``) as the gateway's router sees it.

Data path: the plugin computes ``s_e = <L_e, W_e, M_e, Pmax_e>`` in vLLM's EngineCore and writes it to
its state file; vLLM's API server exposes it as ``slosched:engine_*`` gauges on ``/metrics``
(``vllm_ext/state_metrics.py``); ``Backend.scrape`` parses them with vLLM's own gauges every
``scrape_interval_s``; ``BackendView.exported`` hands them to the router (``exported_mapping``).

What the router gets, and why:

- the engine's five numbers, plus the calls this gateway still holds in its own queue for that backend
  (the engine cannot see them): their prompt tokens join W_prefill, their count W_requests, and their
  claims (prompt + predicted output, else max tokens: the plugin's own rule) leave M_e;
- ``age_s``: the information's age now, i.e. its age at the scrape (measured on the engine's host, so no
  clock is compared across hosts) plus the time since the scrape on the gateway's clock;
- nothing (the view falls back, see ``BackendView.exported``) when the backend exported no state (stock
  vLLM, plugin without a state file) or its state is older than ``engine_state_max_age_s``: a dead
  writer, a hung engine or failing scrapes. Routing on a picture that old would herd calls onto whichever
  engine looked idle when it froze; the fallback is this gateway's own accounting plus vLLM's gauges.

Calls forwarded after the engine's snapshot show up at the next scrape; within that window (about
``export_interval_s`` + ``scrape_interval_s``) the gateway's own in-flight accounting is not added on
top, since the engine may already count them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slosched.core.request import Request
from slosched.policies.engine import nexus_state as keys
from slosched.vllm_ext.state_metrics import AGE_GAUGE, GAUGE_NAMES, SNAPSHOT_GAUGE, STATE_GAUGES

AGE = "age_s"  # the extra key of a live ``exported`` mapping: seconds since the state was current
# Sample lines of the plugin's gauges: the name, then labels or the value.
LINE_PREFIXES = tuple(f"{name}{end}" for name in GAUGE_NAMES for end in ("{", " "))


@dataclass(slots=True, frozen=True)
class ScrapedEngineState:
    """``s_e`` as last scraped; ``age_s`` is its age at that scrape (engine host clock), ``snapshot_unix_s``
    when the engine computed it. Every field is finite except ``peak_tokens_per_s`` (inf: unfitted)."""

    latency_s: float
    pending_prefill_tokens: float
    pending_requests: float
    free_kv_tokens: float
    peak_tokens_per_s: float
    age_s: float
    snapshot_unix_s: float


def engine_state_from_gauges(values: Mapping[str, float]) -> ScrapedEngineState | None:
    """The state from the plugin's gauge values (name -> value); None unless all of them are there and
    finite (the peak may be +Inf or NaN: unknown)."""
    state: dict[str, float] = {}
    for key, (name, _) in STATE_GAUGES.items():
        value = values.get(name)
        if value is None:
            return None
        if key == keys.PEAK:
            value = value if math.isfinite(value) and value > 0 else math.inf
        elif not math.isfinite(value):
            return None
        state[key] = value
    age, snapshot = values.get(AGE_GAUGE), values.get(SNAPSHOT_GAUGE)
    if age is None or snapshot is None or not math.isfinite(age) or not math.isfinite(snapshot):
        return None
    return ScrapedEngineState(
        latency_s=state[keys.LATENCY],
        pending_prefill_tokens=state[keys.PENDING_PREFILL],
        pending_requests=state[keys.PENDING_REQUESTS],
        free_kv_tokens=state[keys.FREE_KV],
        peak_tokens_per_s=state[keys.PEAK],
        age_s=max(age, 0.0),
        snapshot_unix_s=snapshot,
    )


def _claim_tokens(request: Request) -> float:
    output = request.predicted_output_tokens if request.predicted_output_tokens > 0 else request.max_output_tokens
    return float(request.prompt_tokens + output)


def exported_mapping(
    state: ScrapedEngineState,
    scraped_s: float,
    now_s: float,
    max_age_s: float,
    queued: Sequence[Request],
    queued_prefill_tokens: int,
) -> dict[str, float] | None:
    """``InstanceView.exported`` for a backend whose engine exports state: the engine's ``s_e`` plus the
    calls ``queued`` at the gateway for it, with ``age_s``; None when older than ``max_age_s``. Clocks:
    ``scraped_s`` and ``now_s`` on the gateway's clock."""
    age_s = state.age_s + max(now_s - scraped_s, 0.0)
    if age_s > max_age_s:
        return None
    return {
        keys.LATENCY: state.latency_s,
        keys.PENDING_PREFILL: state.pending_prefill_tokens + queued_prefill_tokens,
        keys.PENDING_REQUESTS: state.pending_requests + len(queued),
        keys.FREE_KV: state.free_kv_tokens - sum(_claim_tokens(request) for request in queued),
        keys.PEAK: state.peak_tokens_per_s,
        AGE: age_s,
    }
