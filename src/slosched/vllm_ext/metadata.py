"""Per-request metadata the plugin reads from ``vllm_xargs`` (``request.sampling_params.extra_args``).

Clients (or slosched's gateway, see ``serve/forwarding.py``) send string or number values under the keys of
``SCHEMA``; vLLM's own ``priority`` field is the fallback for ``slosched_priority``. Absolute times are Unix
epoch seconds (the engine compares them with its own wall clock, ``time.time()``, the clock vLLM stamps
``arrival_time`` with). A missing field takes its default; a malformed one (wrong type, NaN, out of range)
also takes its default and is counted in ``MetadataProblems`` (exported in the state file), so a bad client
never fails or stalls its request. Unknown ``slosched_*`` keys are counted too; other keys are ignored
(they belong to other plugins).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slosched.core.request import Request

PREFIX = "slosched_"

# key -> (kind, meaning); kinds: "str", "number" (any finite), "positive" (> 0), "nonneg" (>= 0), "count" (int >= 1)
SCHEMA: dict[str, tuple[str, str]] = {
    "slosched_job_id": ("str", "job the call belongs to (default: the request id, or the relQuery id)"),
    "slosched_stage": ("str", "stage name within the job (default 'default')"),
    "slosched_template": ("str", "workflow/relQuery template, keys output-length beliefs (default 'default')"),
    "slosched_tenant": ("str", "tenant (default 'default')"),
    "slosched_session_id": ("str", "chat session (default none)"),
    "slosched_relquery_id": ("str", "relQuery this row belongs to; the job id when slosched_job_id is absent"),
    "slosched_relquery_size": ("count", "rows of the relQuery (informational: counted in the state export)"),
    "slosched_predicted_tokens": ("nonneg", "predicted output tokens (belief; default 0 = unknown)"),
    "slosched_priority": ("number", "job-level priority, lower runs sooner (default: vLLM's request priority)"),
    "slosched_deadline_unix_s": ("positive", "absolute deadline, Unix seconds (default none)"),
    "slosched_slo_s": ("positive", "deadline relative to arrival at the engine, when no absolute deadline"),
    "slosched_budget_s": ("positive", "this call's share of its job's remaining time (default none)"),
    "slosched_ttft_slo_s": ("positive", "time-to-first-token SLO (default none)"),
    "slosched_tpot_slo_s": ("positive", "time-per-output-token SLO (default none)"),
    "slosched_job_arrival_unix_s": ("positive", "when the job arrived, Unix seconds (default: this arrival)"),
}


@dataclass(slots=True)
class MetadataProblems:
    """Counts of malformed or unknown metadata fields (``field -> count``) and requests affected."""

    counts: dict[str, int] = field(default_factory=dict)
    num_requests: int = 0
    num_requests_with_problems: int = 0

    def add(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1


@dataclass(slots=True, frozen=True)
class RequestMetadata:
    """What the plugin knows of one vLLM request: the slosched ``Request`` plus extras without a field."""

    request: Request
    relquery_size: int | None = None


def _value(kind: str, raw: Any) -> Any:
    """The parsed value, or None when ``raw`` does not fit ``kind``."""
    if kind == "str":
        return raw if isinstance(raw, str) and raw else (str(raw) if isinstance(raw, int | float) else None)
    if isinstance(raw, bool):
        return None
    try:
        number = float(raw)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number):
        return None
    if (kind == "positive" and number <= 0) or (kind == "nonneg" and number < 0):
        return None
    if kind == "count":
        return int(number) if number >= 1 and number == int(number) else None
    return number


def parse_extra_args(extra_args: Mapping[str, Any] | None, problems: MetadataProblems) -> dict[str, Any]:
    """Valid ``slosched_*`` fields of ``extra_args``; every malformed or unknown one is counted."""
    values: dict[str, Any] = {}
    bad = False
    for key, raw in (extra_args or {}).items():
        if not isinstance(key, str) or not key.startswith(PREFIX):
            continue
        spec = SCHEMA.get(key)
        if spec is None:
            problems.add(f"unknown:{key}")
            bad = True
            continue
        value = _value(spec[0], raw)
        if value is None:
            problems.add(key)
            bad = True
        else:
            values[key] = value
    problems.num_requests += 1
    problems.num_requests_with_problems += bad
    return values


def request_metadata(
    request_id: str,
    arrival_unix_s: float,
    prompt_tokens: int,
    max_tokens: int,
    vllm_priority: float,
    extra_args: Mapping[str, Any] | None,
    problems: MetadataProblems,
) -> RequestMetadata:
    """Build the slosched view of a vLLM request (defaults for whatever is missing or malformed)."""
    v = parse_extra_args(extra_args, problems)
    job_id = v.get("slosched_job_id") or v.get("slosched_relquery_id") or request_id
    deadline = v.get("slosched_deadline_unix_s")
    if deadline is None and "slosched_slo_s" in v:
        deadline = arrival_unix_s + v["slosched_slo_s"]
    request = Request(
        id=request_id,
        job_id=job_id,
        stage=v.get("slosched_stage", "default"),
        template=v.get("slosched_template", "default"),
        prompt_tokens=prompt_tokens,
        max_output_tokens=max(1, max_tokens),
        arrival_s=arrival_unix_s,
        job_arrival_s=v.get("slosched_job_arrival_unix_s", arrival_unix_s),
        deadline_s=math.inf if deadline is None else deadline,
        tenant=v.get("slosched_tenant", "default"),
        session_id=v.get("slosched_session_id"),
        predicted_output_tokens=v.get("slosched_predicted_tokens", 0.0),
        budget_s=v.get("slosched_budget_s"),
        priority=v.get("slosched_priority", float(vllm_priority)),
        ttft_slo_s=v.get("slosched_ttft_slo_s"),
        tpot_slo_s=v.get("slosched_tpot_slo_s"),
    )
    return RequestMetadata(request, v.get("slosched_relquery_size"))
