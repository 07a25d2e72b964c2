"""Pages of per-workload rows measured in separate sittings (``bench convergence``, ``bench warmup``): a run of
some of the stack bench's workloads keeps the rows earlier runs left for the others, each row naming the run
it came from, and the figures beside the page are read back for the next run to merge into."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import slosched.bench.stack.setup as stack_setup


def merged_rows(earlier: dict[str, Any] | None, latest: dict[str, Any], run_keys: Sequence[str]) -> dict[str, Any]:
    """``latest``'s figures with the workloads only ``earlier`` measured carried over; every row keeps the run it
    came from (``"run"``: ``run_keys`` of its run's figures). A workload both measured is ``latest``'s; rows in
    the stack bench's order."""
    rows: dict[str, Any] = {}
    for figures in (earlier, latest):
        for name, row in (figures or {}).get("workloads", {}).items():
            rows[name] = {**row, "run": row.get("run") or {key: (figures or {}).get(key) for key in run_keys}}
    order = [workload.name for workload in stack_setup.WORKLOADS]
    ranked = sorted(rows, key=lambda name: order.index(name) if name in order else len(order))
    return {**latest, "workloads": {name: rows[name] for name in ranked}}


def read_beside(page: Path, results: str) -> dict[str, Any] | None:
    """The merged figures an earlier run left at ``results`` beside ``page`` (None when there are none)."""
    path = page.parent / results
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
