"""The dialects, in precedence order, and their merge under slosched's own headers.

``with_dialects(slo, headers, body)`` is the one entry point: it reads every dialect present, strips what
they consumed from the body, and fills each ``SloHeaders`` field the client's ``x-slo-*`` / ``x-job-*``
headers left empty. Precedence, field by field: slosched's headers, then vllm-router, then Dynamo, then
llm-d (a request rarely carries two stacks' fields; when it does, the list order decides, never a mix
within one field). The result goes through ``ops.identity.scoped`` like any header-only request, so the
tenant's priority class and SLO floors bound dialect values exactly as they bound headers.

Nothing a dialect reads reaches the engine as the client sent it: the values land in ``SloHeaders``, the
gateway builds its ``Request`` from them, and only the gateway's own decision is signed into ``vllm_xargs``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from slosched.contract import HEADER_DEADLINE_MS, HEADER_JOB_ID, HEADER_PRIORITY
from slosched.gateway.calls.call import SloHeaders
from slosched.gateway.calls.dialects.base import Dialect, DialectHints
from slosched.gateway.calls.dialects.dynamo import DynamoDialect
from slosched.gateway.calls.dialects.llm_d import LlmDDialect
from slosched.gateway.calls.dialects.vllm_router import VllmRouterDialect

DIALECTS: tuple[Dialect, ...] = (VllmRouterDialect(), DynamoDialect(), LlmDDialect())
_HEADERS = frozenset().union(*(dialect.headers for dialect in DIALECTS))
_BODY_KEYS = frozenset().union(*(dialect.body_keys for dialect in DIALECTS))
_FIELDS = tuple(field.name for field in dataclasses.fields(DialectHints) if field.name != "dialect")


def read_hints(headers: Mapping[str, str], body: dict[str, Any]) -> DialectHints | None:
    """Every dialect's hints merged (first dialect wins per field), the consumed body fields stripped; None
    when the request carries none. 400 (``HttpError``) naming the first bad field."""
    if _HEADERS.isdisjoint(headers) and _BODY_KEYS.isdisjoint(body):
        return None  # the common case: two set operations
    found = [hints for dialect in DIALECTS if (hints := dialect.read(headers, body)) is not None]
    for dialect in DIALECTS:
        dialect.strip(body)  # after every read: a body field one dialect strips, another may not read
    if not found:
        return None
    merged = {key: next((value for h in found if (value := getattr(h, key)) is not None), None) for key in _FIELDS}
    # The dialect that named the job is the one reported; else the first that said anything.
    source = next((h.dialect for h in found if h.names_job), found[0].dialect)
    return DialectHints(dialect=source, **merged)


def with_dialects(slo: SloHeaders, headers: Mapping[str, str], body: dict[str, Any]) -> SloHeaders:
    """``slo`` (from slosched's own headers) with the dialects' hints where the headers said nothing."""
    hints = read_hints(headers, body)
    if hints is None:
        return slo
    own_deadline = HEADER_DEADLINE_MS in headers
    deadline_ms = slo.deadline_ms
    if not own_deadline and hints.deadline_s is not None:
        deadline_ms = hints.deadline_s * 1000.0
    return dataclasses.replace(
        slo,
        deadline_ms=deadline_ms,
        deadline_from_job=not own_deadline and hints.deadline_s is not None,
        ttft_ms=slo.ttft_ms if slo.ttft_ms is not None else hints.ttft_ms,
        tpot_ms=slo.tpot_ms if slo.tpot_ms is not None else hints.tpot_ms,
        priority=slo.priority if HEADER_PRIORITY in headers or hints.priority is None else hints.priority,
        job_id=slo.job_id if HEADER_JOB_ID in headers else hints.job_id,
        stage=slo.stage if slo.stage is not None else hints.stage,
        dialect=hints.dialect if hints.names_job or hints.deadline_s is not None else None,
        program_id=hints.program_id or hints.job_id,
        parent_id=hints.parent_id,
        output_tokens=hints.output_tokens,
        kv_retention_s=hints.kv_retention_s,
    )
