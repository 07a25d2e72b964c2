"""The gateway's live status page: ``/status`` (a self-contained HTML page) refreshing itself every 2 s
from ``/status.json`` (instances, queues, SLO attainment over a recent window, the last routing decisions).

The page holds no data, so it is served to anyone; ``/status.json`` is guarded: by the operator's
``operator_api_keys`` when the config sets any (tenant names and their attainment are the operator's
business), else like every other route. A browser sends no bearer token on navigation, so the page reads
the key from the URL fragment (``/status#key=...``, never sent to the server or its logs) and sends it on
each fetch.

The hot path only appends tuples to two bounded ring buffers (``RecentActivity``); everything else is
computed when the JSON is asked for.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import time
from collections import deque
from collections.abc import Iterable, Mapping, Reversible
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slosched.gateway.dispatch.dispatcher import Dispatcher

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


# Inline script and style only, fetches to this origin only: nothing external can load or be sent out.
STATUS_PAGE_HEADERS = {
    "cache-control": "no-store",
    "content-security-policy": "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'",
}


@functools.cache
def page_html() -> bytes:
    return resources.files("slosched.gateway.http").joinpath("status_page.html").read_bytes()


def operator_allowed(headers: Mapping[str, str], keys: Iterable[str]) -> bool:
    """True when the bearer token (or ``x-api-key``) is one of ``keys``; compared in constant time."""
    auth = headers.get("authorization", "")
    presented = auth[7:].strip() if auth[:7].lower() == "bearer " else headers.get("x-api-key", "")
    digest = hashlib.sha256(presented.encode()).digest()
    found = False
    for key in keys:
        found |= hmac.compare_digest(digest, hashlib.sha256(key.encode()).digest())
    return found and bool(presented)


def snapshot(dispatcher: Dispatcher, window_s: float = SLO_WINDOW_S) -> dict[str, Any]:
    """The JSON of ``/status.json``: plain numbers and strings, newest decisions first."""
    now = dispatcher.clock()
    wall = time.time()
    return {
        "time": wall,
        "instances": _instances(dispatcher),
        "requests": _requests(dispatcher),
        "slo": {"window_s": window_s, "rows": slo_rows(dispatcher.metrics.activity.slo, now, window_s)},
        "decisions": _decision_rows(dispatcher.metrics.activity.decisions, now, wall),
    }


def _decision_rows(decisions: deque[Decision], now_s: float, wall_s: float) -> list[dict[str, Any]]:
    """The newest ``NUM_DECISIONS_SHOWN`` decisions, newest first, with wall-clock times."""
    rows = []
    for index in range(min(len(decisions), NUM_DECISIONS_SHOWN)):
        at, request, backend, reason, waiting, running = decisions[-1 - index]
        rows.append({"time": wall_s - (now_s - at), "request": request, "backend": backend, "reason": reason,
                     "queue_length": waiting, "running": running})  # fmt: skip
    return rows


def _instances(dispatcher: Dispatcher) -> list[dict[str, Any]]:
    registry = dispatcher.metrics.registry
    mono = time.monotonic()
    rows = []
    for backend, queue in zip(dispatcher.backends, dispatcher.queues, strict=False):
        outlier = backend.outlier
        routed = registry.get_sample_value("slosched_routed_total", {"backend": backend.name}) or 0.0
        engine = backend.metrics
        rows.append({
            "name": backend.name, "model": backend.config.model, "healthy": backend.healthy,
            "ejected": outlier.ejected,
            "ejected_for_s": max(outlier.ejected_until_s - mono, 0.0) if outlier.ejected else 0.0,
            "queue_length": len(queue.waiting), "max_queue": queue.max_queue, "running": queue.num_running,
            "window": queue.window, "kv_usage": engine.kv_usage, "engine_running": engine.num_running,
            "engine_waiting": engine.num_waiting, "routed": routed, "last_error": backend.last_error[:120],
        })  # fmt: skip
    return rows


def _requests(dispatcher: Dispatcher) -> dict[str, Any]:
    metrics = dispatcher.metrics
    outcomes: dict[str, float] = {}
    for family in metrics.requests.collect():
        for sample in family.samples:
            if sample.name == "slosched_requests_total":
                key = sample.labels["outcome"]
                outcomes[key] = outcomes.get(key, 0.0) + sample.value
    accepted = metrics.registry.get_sample_value("slosched_requests_accepted_total") or 0.0
    in_flight = sum(queue.num_running for queue in dispatcher.queues)
    waiting = sum(len(queue.waiting) for queue in dispatcher.queues)
    return {"accepted": accepted, "outcomes": outcomes, "running": in_flight, "waiting": waiting}


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
        {"tenant": tenant, "class": f"{priority:g}", "kind": kind, "met": met, "missed": missed,
         "attainment": met / (met + missed)}
        for (tenant, priority, kind), (met, missed) in sorted(counts.items())
    ]  # fmt: skip
