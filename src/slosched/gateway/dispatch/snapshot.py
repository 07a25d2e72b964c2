"""The JSON of ``/status.json`` from the dispatcher's slot set and metrics: plain numbers and strings."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from slosched.gateway.dispatch.slots import Slot, SlotSet
from slosched.gateway.ops.prometheus import GatewayMetrics
from slosched.gateway.ops.status import decision_rows, slo_rows


def status_snapshot(slots: SlotSet, metrics: GatewayMetrics, now: float, window_s: float) -> dict[str, Any]:
    """Instances, request counts, the SLO window's rows and the newest decisions first."""
    wall = time.time()

    def routed(name: str) -> float:
        return metrics.current.get_sample_value("slosched:routed_total", {"backend": name}) or 0.0

    running, waiting = slots.request_counts()
    return {
        "time": wall,
        "instances": instance_rows(slots.slots, routed, time.monotonic()),
        "requests": {**metrics.request_counts(), "running": running, "waiting": waiting},
        "slo": {"window_s": window_s, "rows": slo_rows(metrics.activity.slo, now, window_s)},
        "decisions": decision_rows(metrics.activity.decisions, now, wall),
    }


def instance_rows(slots: Iterable[Slot], routed: Callable[[str], float], mono_s: float) -> list[dict[str, Any]]:
    """The status page's instance table: one row per slot."""
    rows = []
    for slot in slots:
        backend, queue = slot.backend, slot.queue
        outlier, engine = backend.outlier, backend.metrics
        rows.append(
            {
                "name": backend.name,
                "model": backend.config.model,
                "healthy": backend.healthy,
                "ejected": outlier.ejected,
                "ejected_for_s": max(outlier.ejected_until_s - mono_s, 0.0) if outlier.ejected else 0.0,
                "queue_length": len(queue.waiting),
                "max_queue": queue.max_queue,
                "running": queue.num_running,
                "running_sequences": queue.running_sequences,  # what the window bounds (prompts times n)
                "window": queue.window,
                "kv_usage": engine.kv_usage,
                "engine_running": engine.num_running,
                "engine_waiting": engine.num_waiting,
                "routed": routed(backend.name),
                "last_error": backend.last_error[:120],
            }
        )
    return rows
