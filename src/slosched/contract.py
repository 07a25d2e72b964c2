"""The wire contract between a client (or the SDK), the gateway and the vLLM plugin: the one place that names
what crosses a process boundary.

- **Headers** a client sends the gateway (``x-slo-*``, tenant, job identity, API key) and the request id the
  gateway sends a backend. Lower case: HTTP names are case-insensitive and both of the gateway's HTTP
  front ends hand them over lower-cased.
- **Extra arguments** (``vllm_xargs``, read by the plugin from ``sampling_params.extra_args``): ``XARGS``,
  key -> (kind, meaning). The gateway writes them with ``request_xargs``; the plugin parses them
  (``vllm_ext/metadata.py``) with the same table.
- **Clocks.** The gateway's clock is its event loop's (``time.monotonic``, shifted to 0 at start): immune to
  wall-clock steps, but meaningless in another process. The engine's clock is Unix seconds
  (``time.time()``), the clock vLLM stamps ``arrival_time`` with. An absolute time crosses as Unix seconds,
  converted once at the boundary with ``gateway_to_unix_s``; both processes read the same host (or
  NTP-synchronised) wall clock, so the error is the hosts' clock skew. Durations (budgets, SLOs) cross as
  they are.

Depends on ``core`` and the standard library only, so the SDK, the gateway and the plugin can all import it.
"""

from __future__ import annotations

import math
import time
from typing import Any, Final, Literal

from slosched.core.request import Request

# --- headers: client -> gateway ------------------------------------------------------------------------
HEADER_DEADLINE_MS: Final = "x-slo-deadline-ms"  # end-to-end deadline, ms after arrival at the gateway
HEADER_TTFT_MS: Final = "x-slo-ttft-ms"
HEADER_TPOT_MS: Final = "x-slo-tpot-ms"
HEADER_PRIORITY: Final = "x-slo-priority"  # job-level priority, lower runs sooner
HEADER_TENANT: Final = "x-tenant"
HEADER_JOB_ID: Final = "x-job-id"
HEADER_JOB_STAGE: Final = "x-job-stage"
HEADER_API_KEY: Final = "x-api-key"  # alternative to ``authorization: Bearer KEY``
HEADER_AUTHORIZATION: Final = "authorization"
# gateway -> backend: the gateway's request id, so a backend log line can be matched to a gateway call
HEADER_REQUEST_ID: Final = "x-request-id"

SLO_HEADERS: Final = frozenset(
    (
        HEADER_TENANT,
        HEADER_PRIORITY,
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
}


# --- clocks ----------------------------------------------------------------------------------------------
def engine_now_s() -> float:
    """The plugin's (engine's) clock: Unix seconds, the clock vLLM stamps ``arrival_time`` with."""
    return time.time()


def gateway_to_unix_s(gateway_s: float, now_s: float, now_unix_s: float | None = None) -> float:
    """An instant on the gateway's clock as Unix seconds, given one reading of both clocks (``now_s`` on the
    gateway's, ``now_unix_s`` on the wall clock, read now when omitted)."""
    return (engine_now_s() if now_unix_s is None else now_unix_s) + gateway_s - now_s


def unix_to_gateway_s(unix_s: float, now_s: float, now_unix_s: float | None = None) -> float:
    """The inverse of ``gateway_to_unix_s``: a Unix instant (e.g. an engine state snapshot) on the gateway's
    clock."""
    return unix_s - (engine_now_s() if now_unix_s is None else now_unix_s) + now_s


def request_xargs(request: Request, now_s: float, now_unix_s: float | None = None) -> dict[str, Any]:
    """The extra arguments the gateway forwards for ``request`` (gateway-clock times as of ``now_s``).
    Rounded: the values travel as JSON and sub-millisecond digits carry no scheduling information."""
    xargs: dict[str, Any] = {
        XARG_JOB_ID: request.job_id,
        XARG_STAGE: request.stage,
        XARG_PREDICTED_TOKENS: round(request.predicted_output_tokens, 1),
        XARG_PRIORITY: request.priority,
    }
    if math.isfinite(request.deadline_s):
        xargs[XARG_DEADLINE_UNIX_S] = round(gateway_to_unix_s(request.deadline_s, now_s, now_unix_s), 3)
    if request.budget_s is not None and math.isfinite(request.budget_s):
        xargs[XARG_BUDGET_S] = round(request.budget_s, 3)
    if request.best_effort:
        xargs[XARG_BEST_EFFORT] = 1
    return xargs
