"""vllm-router's Program scheduling: ``vllm_xargs.agentic_context`` and the coding agents' session headers.

Checked against vllm-project/router RFC #285 and PR #286 ("Program-level Progress-TTL scheduling"), which
were still open when this was written: the fields are the RFC's and may change before they land. The RFC
differs from slosched's first reading in three ways, followed here:

- the canonical object is tried first, then one recognised header schema, and *schemas are never combined*
  (a request with both an ``agentic_context`` and Claude Code headers takes its identity from the object);
- a Claude Code session is the *task*; ``x-claude-code-agent-id`` is the program (a subagent) and
  ``x-claude-code-parent-agent-id`` its parent; Codex and OpenCode send ``session-id`` (task) and
  ``thread-id`` (program); ``x-session-id`` is the generic fallback (task and program at once);
- the router reads the headers only in its ``auto`` mode; slosched always reads them (they only group
  calls into a job; they claim nothing beyond what the caller's tenant may).

Mapping: ``root_program_id`` (else ``session_id``, the task) -> the job; ``program_id`` -> the program (KV
affinity key), ``parent_program_id`` -> its parent (the session table puts a child in its parent's job);
``deadline_seconds`` -> the job's end-to-end deadline from its first call; ``priority`` -> priority as it is
(vLLM's convention, lower runs sooner, is slosched's); ``expected_output_length`` -> the output-length prior;
``kv_retention_ttl_seconds`` -> how long the program's job (and its affinity key) is kept after its last
call. Unknown keys (``blocks_parent``, ``expected_resume``, ``agent_role``...) are accepted and ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.gateway.calls.dialects.base import (
    MAX_PRIORITY,
    MAX_SECONDS,
    MAX_TOKENS,
    DialectHints,
    header_name,
    integer,
    mapping,
    name,
    number,
)

NAME = "vllm-router"
XARGS = "vllm_xargs"
CONTEXT = "agentic_context"
_WHERE = f"{XARGS}.{CONTEXT}"
# (task header, program header, parent header), tried in this order; the first present schema wins alone.
HEADER_SCHEMAS: tuple[tuple[str, str | None, str | None], ...] = (
    ("x-claude-code-session-id", "x-claude-code-agent-id", "x-claude-code-parent-agent-id"),
    ("session-id", "thread-id", None),
    ("x-session-id", None, None),
)
# Present without their schema's task header, these are still read (and validated) as that schema's.
_HEADERS = frozenset(h for schema in HEADER_SCHEMAS for h in schema if h is not None)


class VllmRouterDialect:
    name = NAME
    headers = _HEADERS
    body_keys = frozenset((XARGS,))

    def read(self, headers: Mapping[str, str], body: Mapping[str, Any]) -> DialectHints | None:
        xargs = body.get(XARGS)
        if isinstance(xargs, Mapping) and CONTEXT in xargs:
            return _from_context(mapping(_WHERE, xargs[CONTEXT]))
        return _from_headers(headers)

    def strip(self, body: dict[str, Any]) -> None:
        """The object is the router's, not vLLM's (whose ``vllm_xargs`` values are scalars): it goes; the
        client's other extra arguments stay, and an emptied ``vllm_xargs`` goes too."""
        xargs = body.get(XARGS)
        if isinstance(xargs, dict) and CONTEXT in xargs:
            rest = {key: value for key, value in xargs.items() if key != CONTEXT}
            if rest:
                body[XARGS] = rest
            else:
                del body[XARGS]


def _from_context(context: Mapping[str, Any]) -> DialectHints:
    def field(key: str) -> str:
        return f"{_WHERE}.{key}"

    program = name(field("program_id"), context.get("program_id"))
    root = name(field("root_program_id"), context.get("root_program_id"))
    session = name(field("session_id"), context.get("session_id"))
    parent = name(field("parent_program_id"), context.get("parent_program_id"))
    priority = number(field("priority"), context.get("priority"), -MAX_PRIORITY, MAX_PRIORITY)
    deadline = number(field("deadline_seconds"), context.get("deadline_seconds"), 0.0, MAX_SECONDS, low_open=True)
    output = integer(field("expected_output_length"), context.get("expected_output_length"), 1, MAX_TOKENS)
    ttl = number(field("kv_retention_ttl_seconds"), context.get("kv_retention_ttl_seconds"), 0.0, MAX_SECONDS)
    return DialectHints(
        dialect=NAME,
        job_id=root or session,
        program_id=program,
        parent_id=parent,
        deadline_s=deadline,
        priority=priority,
        output_tokens=None if output is None else float(output),
        kv_retention_s=ttl,
    )


def _from_headers(headers: Mapping[str, str]) -> DialectHints | None:
    for task_header, program_header, parent_header in HEADER_SCHEMAS:
        task = header_name(headers, task_header)
        if task is None:
            continue
        program = header_name(headers, program_header) if program_header else None
        parent = header_name(headers, parent_header) if parent_header else None
        return DialectHints(dialect=NAME, job_id=task, program_id=program or task, parent_id=parent)
    return None
