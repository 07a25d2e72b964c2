"""Per-request metadata the plugin reads from ``vllm_xargs`` (``request.sampling_params.extra_args``).

Clients (or slosched's gateway, see ``gateway/backends/forwarding.py``) send string or number values under the keys of
``contract.XARGS`` (the one definition of the schema, shared with the gateway); vLLM's own ``priority``
field is the fallback for ``slosched_priority``. Absolute times are Unix epoch seconds, the engine's clock
(``contract.engine_now_s``). A missing field takes its default; a malformed one (wrong type, NaN, out of
range) also takes its default and is counted in ``MetadataProblems`` (exported in the state file), so a bad
client never fails or stalls its request. Unknown ``slosched_*`` keys are counted too; other keys are
ignored (they belong to other plugins).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slosched.contract import (
    XARG_BEST_EFFORT,
    XARG_BUDGET_S,
    XARG_DEADLINE_UNIX_S,
    XARG_JOB_ARRIVAL_UNIX_S,
    XARG_JOB_ID,
    XARG_PREDICTED_TOKENS,
    XARG_PREFIX,
    XARG_PRIORITY,
    XARG_RELQUERY_ID,
    XARG_RELQUERY_SIZE,
    XARG_SESSION_ID,
    XARG_SLO_S,
    XARG_STAGE,
    XARG_TEMPLATE,
    XARG_TENANT,
    XARG_TPOT_SLO_S,
    XARG_TTFT_SLO_S,
    XARGS,
)
from slosched.core.deadline import absolute_deadline_s
from slosched.core.request import Request


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
        if not isinstance(key, str) or not key.startswith(XARG_PREFIX):
            continue
        spec = XARGS.get(key)
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
    job_id = v.get(XARG_JOB_ID) or v.get(XARG_RELQUERY_ID) or request_id
    deadline = v.get(XARG_DEADLINE_UNIX_S)
    if deadline is None:
        deadline = absolute_deadline_s(arrival_unix_s, v.get(XARG_SLO_S))
    request = Request(
        id=request_id,
        job_id=job_id,
        stage=v.get(XARG_STAGE, "default"),
        template=v.get(XARG_TEMPLATE, "default"),
        prompt_tokens=prompt_tokens,
        max_output_tokens=max(1, max_tokens),
        arrival_s=arrival_unix_s,
        job_arrival_s=v.get(XARG_JOB_ARRIVAL_UNIX_S, arrival_unix_s),
        deadline_s=deadline,
        tenant=v.get(XARG_TENANT, "default"),
        session_id=v.get(XARG_SESSION_ID),
        predicted_output_tokens=v.get(XARG_PREDICTED_TOKENS, 0.0),
        budget_s=v.get(XARG_BUDGET_S),
        priority=v.get(XARG_PRIORITY, float(vllm_priority)),
        ttft_slo_s=v.get(XARG_TTFT_SLO_S),
        tpot_slo_s=v.get(XARG_TPOT_SLO_S),
        best_effort=bool(v.get(XARG_BEST_EFFORT, 0)),
    )
    return RequestMetadata(request, v.get(XARG_RELQUERY_SIZE))
