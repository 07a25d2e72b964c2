"""The forward-looking state a NexusSched engine exports to routers: ``s_e = <L_e, W_e, M_e, Pmax_e>``.

In the simulator routers read it through ``InstanceView.exported`` (a plain mapping with the keys
below); the live gateway and the vLLM plugin publish the same keys as a small JSON document
(``to_json``/``from_json``), so PRISM reads one format in every runtime.

Invariants: every field is finite except ``peak_tokens_per_s``, which is inf while unknown (LENS before
its first shape fit; routers must score it neutrally, never as infinitely fast, see ``prism``);
``pending_prefill_tokens``, ``pending_requests`` and ``latency_s`` are >= 0; ``free_kv_tokens`` may be
negative (queued demand exceeds the free KV cache).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from slosched.core.errors import ConfigError

LATENCY = "latency_s"
PENDING_PREFILL = "pending_prefill_tokens"
PENDING_REQUESTS = "pending_requests"
FREE_KV = "free_kv_tokens"
PEAK = "peak_tokens_per_s"


@dataclass(slots=True, frozen=True)
class EngineState:
    """``latency_s`` L_e: predicted duration of the engine's current batch; ``pending_prefill_tokens``
    and ``pending_requests`` W_e: prefill tokens not yet computed (queued and partially prefilled) and
    requests queued or running; ``free_kv_tokens`` M_e: free KV tokens minus what queued requests will
    claim (prompt + predicted output); ``peak_tokens_per_s`` Pmax_e: the fitted peak throughput."""

    latency_s: float
    pending_prefill_tokens: float
    pending_requests: float
    free_kv_tokens: float
    peak_tokens_per_s: float

    def to_mapping(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_mapping(cls, data: Mapping[str, float]) -> EngineState:
        """Parse an exported mapping; a missing or non-numeric key raises ``ConfigError`` naming it."""
        values: dict[str, float] = {}
        for item in fields(cls):
            value = data.get(item.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
                raise ConfigError(f"engine state.{item.name}", f"expected a number, got {value!r}")
            values[item.name] = float(value)
        return cls(**values)

    def to_json(self) -> str:
        # JSON has no infinity: an unbounded peak is written as null and read back as inf.
        raw = {key: (value if math.isfinite(value) else None) for key, value in self.to_mapping().items()}
        return json.dumps(raw, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> EngineState:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError("engine state", f"not JSON: {error}") from None
        if not isinstance(raw, dict):
            raise ConfigError("engine state", "expected a JSON object")
        if raw.get(PEAK, 0.0) is None:
            raw[PEAK] = math.inf
        return cls.from_mapping(raw)
