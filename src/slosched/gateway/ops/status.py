"""The data behind the gateway's status page (``http/status_page.py`` serves the page and ``/status.json``):
the recent routing decisions and SLO results, and the rows the JSON shows of them.

The hot path only appends tuples to two bounded ring buffers (``RecentActivity``); everything else is
computed when the JSON is asked for (``Dispatcher.snapshot``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Reversible
from dataclasses import dataclass, field
from typing import Any

MAX_DECISIONS = 200
MAX_SLO_RESULTS = 50_000  # at ~1k SLO results/s, the last ~50 s; the window below reads what is there
SLO_WINDOW_S = 60.0
NUM_DECISIONS_SHOWN = 25
# (time on the dispatcher clock, request id, backend, reason, queue length, running) at the decision.
Decision = tuple[float, str, str, str, int, int]
# (time on the dispatcher clock, tenant label, priority class, SLO kind, met).
SloResult = tuple[float, str, float, str, bool]


def _decisions() -> deque[Decision]:
    return deque(maxlen=MAX_DECISIONS)


def _slo_results() -> deque[SloResult]:
    return deque(maxlen=MAX_SLO_RESULTS)


@dataclass(slots=True)
class RecentActivity:
    """Bounded ring buffers the hot path appends to (O(1), no allocation beyond the tuple)."""

    decisions: deque[Decision] = field(default_factory=_decisions)
    slo: deque[SloResult] = field(default_factory=_slo_results)


def decision_rows(decisions: deque[Decision], now_s: float, wall_s: float) -> list[dict[str, Any]]:
    """The newest ``NUM_DECISIONS_SHOWN`` decisions, newest first, with wall-clock times."""
    rows = []
    for index in range(min(len(decisions), NUM_DECISIONS_SHOWN)):
        at, request, backend, reason, waiting, running = decisions[-1 - index]
        rows.append(
            {
                "time": wall_s - (now_s - at),
                "request": request,
                "backend": backend,
                "reason": reason,
                "queue_length": waiting,
                "running": running,
            }
        )
    return rows


def slo_rows(results: Reversible[SloResult], now_s: float, window_s: float) -> list[dict[str, Any]]:
    """SLO results of the last ``window_s`` per (tenant, class, kind); attainment = met / (met + missed).
    ``results`` are in time order: reading from the newest, stop at the first one out of the window."""
    counts: dict[tuple[str, float, str], list[int]] = {}
    since = now_s - window_s
    for at, tenant, priority, kind, met in reversed(results):
        if at < since:
            break
        pair = counts.setdefault((tenant, priority, kind), [0, 0])
        pair[0 if met else 1] += 1
    return [
        {
            "tenant": tenant,
            "class": f"{priority:g}",
            "kind": kind,
            "met": met,
            "missed": missed,
            "attainment": met / (met + missed),
        }
        for (tenant, priority, kind), (met, missed) in sorted(counts.items())
    ]
