"""NVIDIA Dynamo: ``nvext.agent_hints`` in the body and the ``X-Dynamo-*`` session headers.

Checked against Dynamo's "Agent Hints" and "Session IDs" pages (docs.nvidia.com/dynamo, v1.3 to v1.6 and
dev) and its ``protocols/agents.rs``. Where they differ from slosched's first reading:

- ``priority``: *higher* values mean higher priority in Dynamo (slosched's lower-runs-sooner scale is
  vLLM's), so it is negated; ``strict_priority`` is a tier that always precedes lower tiers, so it is
  weighted above any ``priority`` (``_TIER``).
- ``X-Dynamo-Session-ID`` is passive identity in Dynamo (no sticky placement by itself); here it names the
  program and its job, and ``X-Dynamo-Parent-Session-ID`` (also documented) puts a subagent's session in its
  parent's job. ``X-Dynamo-Session-Final`` is read by lifecycle consumers only and is ignored.
- ``osl`` -> the output-length prior. ``speculative_prefill`` (a boolean; slosched has no next-turn
  prefill) and the older ``latency_sensitivity`` (seconds, v1.0-era docs) are validated and ignored.
The coding agents' native headers are read by the vllm-router dialect (``vllm_router.HEADER_SCHEMAS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.gateway.calls.dialects.base import (
    MAX_PRIORITY,
    MAX_SECONDS,
    MAX_TOKENS,
    DialectHints,
    boolean,
    header_name,
    integer,
    mapping,
    number,
)

NAME = "dynamo"
NVEXT = "nvext"
HINTS = "agent_hints"
_WHERE = f"{NVEXT}.{HINTS}"
SESSION_HEADER = "x-dynamo-session-id"
PARENT_HEADER = "x-dynamo-parent-session-id"
MAX_TIER = 1000
_TIER = 2 * MAX_PRIORITY + 1  # one strict tier outweighs every priority within it


class DynamoDialect:
    name = NAME
    headers = frozenset((SESSION_HEADER, PARENT_HEADER))
    body_keys = frozenset((NVEXT,))

    def read(self, headers: Mapping[str, str], body: Mapping[str, Any]) -> DialectHints | None:
        session = header_name(headers, SESSION_HEADER)
        parent = header_name(headers, PARENT_HEADER)
        nvext = body.get(NVEXT)
        hints = None
        if nvext is not None:
            hints = mapping(_WHERE, mapping(NVEXT, nvext).get(HINTS, {}))
        if session is None and parent is None and not hints:
            return None
        priority, output = _read_hints(hints or {})
        return DialectHints(dialect=NAME, program_id=session, parent_id=parent, priority=priority, output_tokens=output)

    def strip(self, body: dict[str, Any]) -> None:
        """``agent_hints`` were consumed; the rest of ``nvext`` (a Dynamo extension vLLM ignores) stays as the
        client sent it, and an emptied ``nvext`` goes."""
        nvext = body.get(NVEXT)
        if isinstance(nvext, dict) and HINTS in nvext:
            rest = {key: value for key, value in nvext.items() if key != HINTS}
            if rest:
                body[NVEXT] = rest
            else:
                del body[NVEXT]


def _read_hints(hints: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(priority on slosched's scale, output-length prior)."""

    def field(key: str) -> str:
        return f"{_WHERE}.{key}"

    priority = number(field("priority"), hints.get("priority"), -MAX_PRIORITY, MAX_PRIORITY)
    tier = integer(field("strict_priority"), hints.get("strict_priority"), -MAX_TIER, MAX_TIER)
    osl = integer(field("osl"), hints.get("osl"), 1, MAX_TOKENS)
    boolean(field("speculative_prefill"), hints.get("speculative_prefill"))
    number(field("latency_sensitivity"), hints.get("latency_sensitivity"), 0.0, MAX_SECONDS)
    ours = None
    if priority is not None or tier is not None:
        # Dynamo: higher runs sooner; slosched: lower runs sooner.
        ours = -((tier or 0) * _TIER + (priority or 0.0))
    return ours, None if osl is None else float(osl)
