"""llm-d (and the Gateway API Inference Extension): SLO headers and the inference objective.

Checked against llm-d's "EPP HTTP Headers Reference" (llm-d.ai, 0.8 and current) and the Inference
Extension's InferenceObjective and "Priority and Capacity" pages. Where they differ from slosched's first
reading:

- the canonical SLO headers are ``x-llm-d-slo-ttft-ms`` / ``x-llm-d-slo-tpot-ms`` since llm-d Router 0.9;
  ``x-slo-ttft-ms`` / ``x-slo-tpot-ms`` are their deprecated aliases, and happen to be slosched's own
  header names, so those are read (as slosched's) by ``calls.call.parse_slo_headers`` and win anyway.
- there is no per-request priority: ``x-llm-d-inference-objective`` (deprecated alias
  ``x-gateway-inference-objective``) *names* an InferenceObjective resource whose ``priority`` (higher runs
  sooner; negative is shed under saturation) lives in the cluster. slosched has no copy of those
  resources: the objective's name becomes the call's stage (its output lengths are learned per objective,
  and it shows in job results), and the priority stays the tenant's class from the gateway's config.
- ``x-llm-d-inference-fairness-id`` groups flows for fair sharing; slosched shares fairly by tenant, the
  operator's identity, so the header is not read (a client-chosen id must not buy a share).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.gateway.calls.dialects.base import DialectHints, header_ms, header_name

NAME = "llm-d"
TTFT = ("x-llm-d-slo-ttft-ms",)
TPOT = ("x-llm-d-slo-tpot-ms",)
OBJECTIVE = ("x-llm-d-inference-objective", "x-gateway-inference-objective")  # canonical first: it wins


class LlmDDialect:
    name = NAME
    headers = frozenset((*TTFT, *TPOT, *OBJECTIVE))
    body_keys: frozenset[str] = frozenset()

    def read(self, headers: Mapping[str, str], body: Mapping[str, Any]) -> DialectHints | None:
        ttft = _first(headers, TTFT, header_ms)
        tpot = _first(headers, TPOT, header_ms)
        objective = _first(headers, OBJECTIVE, header_name)
        if ttft is None and tpot is None and objective is None:
            return None
        return DialectHints(dialect=NAME, ttft_ms=ttft, tpot_ms=tpot, stage=objective)

    def strip(self, body: dict[str, Any]) -> None:
        return None  # headers only


def _first(headers: Mapping[str, str], names: tuple[str, ...], parse: Any) -> Any:
    for header in names:
        value = parse(headers, header)
        if value is not None:
            return value
    return None
