"""The JSON of ``/status.json`` from the dispatcher's slot set and metrics: plain numbers and strings."""

from __future__ import annotations

import time
from typing import Any

from slosched.gateway.dispatch.slots import SlotSet, instance_rows
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
