"""Per-request metadata the plugin reads from ``vllm_xargs`` (``request.sampling_params.extra_args``).

Clients (or slosched's gateway, see ``gateway/backends/forwarding.py``) send string or number values under the keys of
``contract.XARGS`` (the one definition of the schema, shared with the gateway); vLLM's own ``priority``
field is the fallback for ``slosched_priority``. Absolute times are Unix epoch seconds, the engine's clock
(``contract.engine_now_s``). A missing field takes its default; a malformed one (wrong type, NaN, out of
range) also takes its default and is counted in ``MetadataProblems`` (exported in the state file), so a bad
client never fails or stalls its request. Unknown ``slosched_*`` keys are counted too; other keys are
ignored (they belong to other plugins).

**Trust.** ``slosched_*`` fields are believed only when signed by the gateway (``contract.verify_xargs``,
key ``SLOSCHED_XARGS_KEY``): with a key, unsigned or badly signed fields are all ignored (the request
schedules on vLLM's own fields: arrival, ``priority``) and counted (``untrusted:<why>``); without a key,
nothing is believed (``untrusted:no_key``), unless ``SLOSCHED_XARGS_TRUST=unsigned`` (a plugin reachable
only by trusted clients, e.g. a benchmark driving vLLM directly).
"""

from __future__ import annotations

import math
import os
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
    XARG_REQUEST_ID,
    XARG_SESSION_ID,
    XARG_SIGNATURE,
    XARG_SLO_S,
    XARG_STAGE,
    XARG_TEMPLATE,
    XARG_TENANT,
    XARG_TPOT_SLO_S,
    XARG_TTFT_SLO_S,
    XARGS,
    verify_xargs,
    xargs_key,
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


TRUST_ENV = "SLOSCHED_XARGS_TRUST"
_SIGNING = frozenset((XARG_REQUEST_ID, XARG_SIGNATURE))


@dataclass(slots=True, frozen=True)
class XargsTrust:
    """Which ``slosched_*`` fields the plugin believes: those signed with ``key``; with no key, none, unless
    ``unsigned`` (every field, signed or not: only for an engine no untrusted client can reach)."""

    key: bytes | None = None
    unsigned: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> XargsTrust:
        env = os.environ if env is None else env
        return cls(xargs_key(env), env.get(TRUST_ENV, "") == "unsigned")

    def problem(self, extra: Mapping[str, Any], request_id: str) -> str | None:
        """Why ``extra``'s fields are not believed (None: they are)."""
        if self.unsigned:
            return None
        if self.key is None:
            return "no_key"
        return verify_xargs(extra, self.key, request_id)


TRUST_UNSIGNED = XargsTrust(unsigned=True)


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


def parse_extra_args(
    extra_args: Mapping[str, Any] | None, problems: MetadataProblems, trust: XargsTrust, request_id: str = ""
) -> dict[str, Any]:
    """Valid ``slosched_*`` fields of ``extra_args`` when ``trust`` believes them (else none, counted as
    ``untrusted:<why>``); every malformed or unknown one is counted."""
    values: dict[str, Any] = {}
    problems.num_requests += 1
    if not extra_args or not any(isinstance(key, str) and key.startswith(XARG_PREFIX) for key in extra_args):
        return values
    why = trust.problem(extra_args, request_id)
    if why is not None:
        problems.add(f"untrusted:{why}")
        problems.num_requests_with_problems += 1
        return values
    bad = False
    for key, raw in extra_args.items():
        if not isinstance(key, str) or not key.startswith(XARG_PREFIX) or key in _SIGNING:
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
    trust: XargsTrust,
) -> RequestMetadata:
    """Build the slosched view of a vLLM request (defaults for whatever is missing, malformed or not
    trusted)."""
    v = parse_extra_args(extra_args, problems, trust, request_id)
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
