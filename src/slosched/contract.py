"""The wire contract between a client (or the SDK), the gateway and the vLLM plugin: the one place that names
what crosses a process boundary.

- **Headers** a client sends the gateway (``x-slo-*``, tenant, job identity, API key) and the request id the
  gateway sends a backend. Lower case: HTTP names are case-insensitive and both of the gateway's HTTP
  front ends hand them over lower-cased.
- **Extra arguments** (``vllm_xargs``, read by the plugin from ``sampling_params.extra_args``): ``XARGS``,
  key -> (kind, meaning). The gateway writes them with ``request_xargs``; the plugin parses them
  (``vllm_ext/metadata.py``) with the same table.
- **Signed extra arguments.** The engine trusts a ``slosched_*`` field only when the gateway signed it:
  ``sign_xargs`` adds ``slosched_request_id`` and ``slosched_sig`` (HMAC-SHA256, key ``SLOSCHED_XARGS_KEY``,
  over ``canonical_xargs``: the sorted fields as compact JSON, then the request id); ``verify_xargs`` gives
  the plugin the fields back only when the signature holds. Clients never set a ``slosched_*`` field
  (``reserved_xarg``: the gateway answers 400 naming it).
- **Clocks.** The gateway's clock is its event loop's (``time.monotonic``, shifted to 0 at start): immune to
  wall-clock steps, but meaningless in another process. The engine's clock is Unix seconds
  (``time.time()``), the clock vLLM stamps ``arrival_time`` with. An absolute time crosses as Unix seconds,
  converted once at the boundary with ``gateway_to_unix_s`` on one kept offset (``UnixAnchor``, so a job's
  calls carry one deadline); both processes read the same host (or NTP-synchronised) wall clock, so the
  error is the hosts' clock skew. Durations (budgets, SLOs) cross as
  they are.

Depends on ``core`` and the standard library only, so the SDK, the gateway and the plugin can all import it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

from slosched.core.request import Request

# --- headers: client -> gateway ------------------------------------------------------------------------
HEADER_DEADLINE_MS: Final = "x-slo-deadline-ms"  # end-to-end deadline, ms after arrival at the gateway
HEADER_TTFT_MS: Final = "x-slo-ttft-ms"
HEADER_TPOT_MS: Final = "x-slo-tpot-ms"
HEADER_PRIORITY: Final = "x-slo-priority"  # job-level priority, lower runs sooner
# What the client wants when the job layer finds its call (job) can no longer meet its deadline: "relegate"
# (default: served as best effort) or "reject" (an early 503 ``deadline_infeasible``, nothing served).
HEADER_IF_INFEASIBLE: Final = "x-slo-if-infeasible"
IF_INFEASIBLE: Final = ("relegate", "reject")
HEADER_TENANT: Final = "x-tenant"
HEADER_JOB_ID: Final = "x-job-id"
HEADER_JOB_STAGE: Final = "x-job-stage"
HEADER_API_KEY: Final = "x-api-key"  # alternative to ``authorization: Bearer KEY``
HEADER_AUTHORIZATION: Final = "authorization"
# gateway -> backend: the gateway's request id, so a backend log line can be matched to a gateway call
HEADER_REQUEST_ID: Final = "x-request-id"


def tenant_header(tenant: str | None) -> dict[str, str]:
    """How a client names the tenant it acts for: the ``x-tenant`` header, the only place the gateway reads it
    (an API key's own tenant needs none; naming another needs the operator's ``act_as``)."""
    return {} if tenant is None else {HEADER_TENANT: tenant}


SLO_HEADERS: Final = frozenset(
    (
        HEADER_TENANT,
        HEADER_PRIORITY,
        HEADER_IF_INFEASIBLE,
        HEADER_DEADLINE_MS,
        HEADER_TTFT_MS,
        HEADER_TPOT_MS,
        HEADER_JOB_ID,
        HEADER_JOB_STAGE,
    )
)

# --- extra arguments: gateway (or any client) -> plugin --------------------------------------------------
XARG_PREFIX: Final = "slosched_"
XArgKind = Literal["str", "number", "positive", "nonneg", "count"]

XARG_JOB_ID: Final = "slosched_job_id"
XARG_STAGE: Final = "slosched_stage"
XARG_TEMPLATE: Final = "slosched_template"
XARG_TENANT: Final = "slosched_tenant"
XARG_SESSION_ID: Final = "slosched_session_id"
XARG_RELQUERY_ID: Final = "slosched_relquery_id"
XARG_RELQUERY_SIZE: Final = "slosched_relquery_size"
XARG_PREDICTED_TOKENS: Final = "slosched_predicted_tokens"
XARG_PRIORITY: Final = "slosched_priority"
XARG_DEADLINE_UNIX_S: Final = "slosched_deadline_unix_s"
XARG_SLO_S: Final = "slosched_slo_s"
XARG_BUDGET_S: Final = "slosched_budget_s"
XARG_TTFT_SLO_S: Final = "slosched_ttft_slo_s"
XARG_TPOT_SLO_S: Final = "slosched_tpot_slo_s"
XARG_JOB_ARRIVAL_UNIX_S: Final = "slosched_job_arrival_unix_s"
XARG_BEST_EFFORT: Final = "slosched_best_effort"
XARG_REQUEST_ID: Final = "slosched_request_id"  # signed: the gateway's request id (a part of vLLM's)
XARG_SIGNATURE: Final = "slosched_sig"  # hex HMAC-SHA256 of canonical_xargs (see sign_xargs)
XARGS_KEY_ENV: Final = "SLOSCHED_XARGS_KEY"  # the shared secret of gateway and plugin

# key -> (kind, meaning); kinds: "str", "number" (any finite), "positive" (> 0), "nonneg" (>= 0), "count"
# (int >= 1). A value that does not fit its kind takes the default (the plugin counts it, never fails on it).
XARGS: Final[dict[str, tuple[XArgKind, str]]] = {
    XARG_JOB_ID: ("str", "job the call belongs to (default: the request id, or the relQuery id)"),
    XARG_STAGE: ("str", "stage name within the job (default 'default')"),
    XARG_TEMPLATE: ("str", "workflow/relQuery template, keys output-length beliefs (default 'default')"),
    XARG_TENANT: ("str", "tenant (default 'default')"),
    XARG_SESSION_ID: ("str", "chat session (default none)"),
    XARG_RELQUERY_ID: ("str", "relQuery this row belongs to; the job id when slosched_job_id is absent"),
    XARG_RELQUERY_SIZE: ("count", "rows of the relQuery (informational: counted in the state export)"),
    XARG_PREDICTED_TOKENS: ("nonneg", "predicted output tokens (belief; default 0 = unknown)"),
    XARG_PRIORITY: ("number", "job-level priority, lower runs sooner (default: vLLM's request priority)"),
    XARG_DEADLINE_UNIX_S: ("positive", "absolute deadline, Unix seconds (default none)"),
    XARG_SLO_S: ("positive", "deadline relative to arrival at the engine, when no absolute deadline"),
    XARG_BUDGET_S: ("positive", "this call's share of its job's remaining time (default none)"),
    XARG_TTFT_SLO_S: ("positive", "time-to-first-token SLO (default none)"),
    XARG_TPOT_SLO_S: ("positive", "time-per-output-token SLO (default none)"),
    XARG_JOB_ARRIVAL_UNIX_S: ("positive", "when the job arrived, Unix seconds (default: this arrival)"),
    XARG_BEST_EFFORT: ("nonneg", "1: the job layer demoted the call to best effort, its job is late (default 0)"),
    XARG_REQUEST_ID: ("str", "the gateway's request id, bound into the signature (part of vLLM's request id)"),
    XARG_SIGNATURE: ("str", "HMAC-SHA256 (hex) of the other slosched_* fields and the request id"),
}


# --- trust: what the engine believes comes from the gateway, signed ------------------------------------
def reserved_xarg(xargs: Any) -> str | None:
    """The first ``slosched_*`` key of a client's ``vllm_xargs`` (None: none). Every such key is the
    gateway's to set (or unknown): a client that sends one is refused, never silently overridden."""
    if not isinstance(xargs, Mapping):
        return None
    for key in xargs:
        if isinstance(key, str) and key.startswith(XARG_PREFIX):
            return key
    return None


def xargs_key(env: Mapping[str, str] | None = None) -> bytes | None:
    """The signing key from ``SLOSCHED_XARGS_KEY`` (None when unset or empty)."""
    text = (os.environ if env is None else env).get(XARGS_KEY_ENV, "")
    return text.encode() if text else None


def canonical_xargs(fields: Mapping[str, Any], request_id: str) -> bytes:
    """What is signed: the ``slosched_*`` fields but the signature, as sorted compact JSON, a newline, the
    request id. Values are JSON scalars, which parse back to equal values and re-encode to the same text."""
    signed = {key: value for key, value in fields.items() if key.startswith(XARG_PREFIX) and key != XARG_SIGNATURE}
    text = json.dumps(signed, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return text.encode() + b"\n" + request_id.encode()


def _mac(fields: Mapping[str, Any], request_id: str, key: bytes) -> str:
    return hmac.new(key, canonical_xargs(fields, request_id), hashlib.sha256).hexdigest()


def sign_xargs(fields: dict[str, Any], request_id: str, key: bytes) -> dict[str, Any]:
    """``fields`` with the request id and the signature added (in place; returned)."""
    fields[XARG_REQUEST_ID] = request_id
    fields[XARG_SIGNATURE] = _mac(fields, request_id, key)
    return fields


def verify_xargs(extra: Mapping[str, Any], key: bytes, engine_request_id: str | None = None) -> str | None:
    """Why ``extra``'s ``slosched_*`` fields are not to be trusted (None: the signature holds). With
    ``engine_request_id`` (vLLM's id, which embeds the gateway's ``x-request-id``) the signed id must be
    part of it, so signed fields cannot be copied onto another request."""
    signature, request_id = extra.get(XARG_SIGNATURE), extra.get(XARG_REQUEST_ID)
    if not isinstance(signature, str) or not isinstance(request_id, str):
        return "unsigned"
    try:
        expected = _mac(extra, request_id, key)
    except (TypeError, ValueError):  # a value JSON cannot encode
        return "bad_signature"
    if not hmac.compare_digest(expected, signature):
        return "bad_signature"
    if engine_request_id is not None and request_id not in engine_request_id:
        return "request_id_mismatch"
    return None


# --- clocks ----------------------------------------------------------------------------------------------
def engine_now_s() -> float:
    """The plugin's (engine's) clock: Unix seconds, the clock vLLM stamps ``arrival_time`` with."""
    return time.time()


def gateway_to_unix_s(gateway_s: float, now_s: float, now_unix_s: float | None = None) -> float:
    """An instant on the gateway's clock as Unix seconds, given one reading of both clocks (``now_s`` on the
    gateway's, ``now_unix_s`` on the wall clock, read now when omitted)."""
    return (engine_now_s() if now_unix_s is None else now_unix_s) + gateway_s - now_s


class UnixAnchor:
    """The gateway clock's offset from Unix seconds, read once and kept while the two clocks agree: every
    call of a job then carries the same Unix deadline (one gateway instant, one Unix instant), where a
    fresh reading of both clocks per call shifts it by the read's jitter (a millisecond after rounding).
    Re-read when the wall clock has moved more than ``drift_s`` away from the monotonic one (an NTP step or
    a long slew), so the engine's comparison against ``time.time()`` stays that close to the truth."""

    __slots__ = ("drift_s", "offset_s", "wall")

    def __init__(self, drift_s: float = 0.05, wall: Callable[[], float] = engine_now_s) -> None:
        self.drift_s = drift_s
        self.wall = wall
        self.offset_s: float | None = None

    def unix_s(self, now_s: float) -> float:
        """``now_s`` (gateway clock) as Unix seconds, on the kept offset."""
        offset = self.wall() - now_s
        if self.offset_s is None or abs(offset - self.offset_s) > self.drift_s:
            self.offset_s = offset
        return now_s + self.offset_s


def unix_to_gateway_s(unix_s: float, now_s: float, now_unix_s: float | None = None) -> float:
    """The inverse of ``gateway_to_unix_s``: a Unix instant (e.g. an engine state snapshot) on the gateway's
    clock."""
    return unix_s - (engine_now_s() if now_unix_s is None else now_unix_s) + now_s


def request_xargs(
    request: Request,
    now_s: float,
    now_unix_s: float | None = None,
    key: bytes | None = None,
    request_id: str | None = None,
) -> dict[str, Any]:
    """The extra arguments the gateway forwards for ``request`` (gateway-clock times as of ``now_s``): every
    field the engine schedules by, all from the gateway's own decision (``request`` as the gateway built
    it: the operator's tenant, class and floors), signed with ``key`` when there is one. Rounded: the
    values travel as JSON and sub-millisecond digits carry no scheduling information. ``request_id``: the
    ``x-request-id`` sent with the call (default ``request.id``), which the signature binds them to."""
    xargs: dict[str, Any] = {
        XARG_JOB_ID: request.job_id,
        XARG_STAGE: request.stage,
        XARG_TEMPLATE: request.template,
        XARG_TENANT: request.tenant,
        XARG_PREDICTED_TOKENS: round(request.predicted_output_tokens, 1),
        XARG_PRIORITY: request.priority,
        XARG_JOB_ARRIVAL_UNIX_S: round(gateway_to_unix_s(request.job_arrival_s, now_s, now_unix_s), 3),
    }
    if math.isfinite(request.deadline_s):
        xargs[XARG_DEADLINE_UNIX_S] = round(gateway_to_unix_s(request.deadline_s, now_s, now_unix_s), 3)
    if request.budget_s is not None and math.isfinite(request.budget_s):
        xargs[XARG_BUDGET_S] = round(request.budget_s, 3)
    if request.ttft_slo_s is not None:
        xargs[XARG_TTFT_SLO_S] = round(request.ttft_slo_s, 6)
    if request.tpot_slo_s is not None:
        xargs[XARG_TPOT_SLO_S] = round(request.tpot_slo_s, 6)
    if request.session_id is not None:
        xargs[XARG_SESSION_ID] = request.session_id
    if request.best_effort:
        xargs[XARG_BEST_EFFORT] = 1
    return xargs if key is None else sign_xargs(xargs, request.id if request_id is None else request_id, key)
