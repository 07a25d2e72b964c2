"""What every dialect produces and how it validates what it reads.

A dialect turns request headers and body into one ``DialectHints``: the job it names (explicitly, or through
a program and its parent), an end-to-end deadline counted from the job's first call, a priority already on
slosched's scale (lower runs sooner, whatever the dialect's own convention), token-latency SLOs, an
output-length prior and a KV-retention wish. ``registry`` merges them under slosched's own headers.

Values are checked as strictly as the ``x-slo-*`` headers: a wrong type, a non-finite or out-of-range number
is a 400 naming the field (``vllm_xargs.agentic_context.deadline_seconds``, ``header x-dynamo-session-id``)
and what it accepts, never a 500, never an echo of more than ~64 characters. A ``slosched_*`` key inside a
dialect object is refused like one in ``vllm_xargs``: those are the gateway's own, signed fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from slosched.contract import XARG_PREFIX
from slosched.gateway.calls.call import HttpError, bad_request

MAX_NAME_CHARS = 128  # ids key gateway state (the session table): bounded like x-job-id
MAX_SECONDS = 1e6  # ~11.6 days, the job API's slo_s bound
MAX_TOKENS = 10_000_000  # beyond every model's context; a larger prior is a client bug
MAX_PRIORITY = 1e6  # the job API's priority bound
_ECHO = 64


@dataclass(slots=True, frozen=True)
class DialectHints:
    """One request's hints in slosched's terms (None: the dialect did not say).

    ``job_id``: the job the call belongs to when the dialect names it (a root program, a task, a session);
    otherwise the session table resolves it from ``parent_id`` (the parent's job) or ``program_id`` (a program
    with no parent is its own job). ``program_id`` also keys KV affinity (``Request.session_id``)."""

    dialect: str
    job_id: str | None = None
    program_id: str | None = None
    parent_id: str | None = None
    deadline_s: float | None = None
    priority: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    output_tokens: float | None = None
    kv_retention_s: float | None = None
    stage: str | None = None

    @property
    def names_job(self) -> bool:
        return self.job_id is not None or self.program_id is not None or self.parent_id is not None


class Dialect(Protocol):
    """One serving stack's request fields. ``read`` returns None when the request carries none of them (the
    common case: it must cost a few dict lookups); ``strip`` removes from the body what was consumed and
    vLLM would refuse or ignore (a nested object inside ``vllm_xargs``, Dynamo's ``nvext``)."""

    name: str
    headers: frozenset[str]  # lower-case header names it reads
    body_keys: frozenset[str]  # top-level body keys it reads

    def read(self, headers: Mapping[str, str], body: Mapping[str, Any]) -> DialectHints | None: ...

    def strip(self, body: dict[str, Any]) -> None: ...


def short(value: Any) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else "<a huge integer>"
    return text if len(text) <= _ECHO else text[: _ECHO - 3] + "..."


def mapping(field: str, value: Any) -> Mapping[str, Any]:
    """An object; its ``slosched_*`` keys refused (they are the gateway's to set, and signed)."""
    if not isinstance(value, Mapping):
        raise bad_request(field, f"expected an object, got {type(value).__name__}")
    for key in value:
        if isinstance(key, str) and key.startswith(XARG_PREFIX):
            raise bad_request(f"{field}.{key[:_ECHO]}", "slosched_* fields are the gateway's to set (and signed)")
    return value


def name(field: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME_CHARS:
        raise bad_request(field, f"expected a string of 1..{MAX_NAME_CHARS} characters, got {short(value)}")
    return value


def number(field: str, value: Any, low: float, high: float, low_open: bool = False) -> float | None:
    """A JSON number in [low, high] ((low, high] with ``low_open``); a bool is not a number here."""
    if value is None:
        return None
    bounds = f"{'(' if low_open else '['}{low:g}, {high:g}]"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_request(field, f"expected a number in {bounds}, got {short(value)}")
    result = float(value)
    if not (math.isfinite(result) and (result > low if low_open else result >= low) and result <= high):
        raise bad_request(field, f"expected a number in {bounds}, got {short(value)}")
    return result


def integer(field: str, value: Any, low: int, high: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise bad_request(field, f"expected an integer in [{low}, {high}], got {short(value)}")
    return value


def boolean(field: str, value: Any) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise bad_request(field, f"expected true or false, got {short(value)}")
    return value


def header_name(headers: Mapping[str, str], header: str) -> str | None:
    value = headers.get(header)
    if value is not None and not 0 < len(value) <= MAX_NAME_CHARS:
        raise bad_request(f"header {header}", f"expected 1..{MAX_NAME_CHARS} characters, got {len(value)}")
    return value


def header_ms(headers: Mapping[str, str], header: str) -> float | None:
    """Milliseconds in (0, 1e9], as slosched's own ``x-slo-*-ms`` headers take them."""
    text = headers.get(header)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= 1e9):
        raise bad_request(f"header {header}", f"expected milliseconds in (0, 1e9], got {short(text)}")
    return value


__all__ = ["Dialect", "DialectHints", "HttpError"]
