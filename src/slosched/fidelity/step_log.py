"""Measured engine steps from the scheduler plugin's step timing file (``step_timing_file``).

The plugin writes one line per completed step: its shape, when its model step ended (``done_s``), how long
the model step ran (``model_s``) and how many requests were still running or waiting after it
(``pending``). A simulated step is the engine's whole period, from one step's start to the next's: the
model step plus the engine core's own work in between (finishing outputs, taking in new requests,
scheduling), which the model step alone leaves out and which grows with what arrives. So a step followed
at once by another (``pending`` > 0: vLLM loops straight on) lasts until the next one starts; a step
after which the engine went idle gets the median of those in-between times instead (its gap is idle
time, not work).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slosched.core.errors import ConfigError
from slosched.core.views import StepObservation


def read_lines(path: Path, start: int, end: int | None = None) -> tuple[list[dict[str, Any]], int]:
    """The complete lines written between byte ``start`` and ``end`` (None: the end of the file), and the
    offset after the last complete line (where the next read starts)."""
    with path.open("rb") as handle:
        handle.seek(start)
        data = handle.read() if end is None else handle.read(max(end - start, 0))
    complete = data[: data.rfind(b"\n") + 1]
    try:
        records = [json.loads(line) for line in complete.splitlines() if line.strip()]
    except json.JSONDecodeError as error:
        raise ConfigError("step timing file", f"{path}: not a JSON line: {error}") from None
    return records, start + len(complete)


def step_observations(records: Sequence[dict[str, Any]]) -> list[StepObservation]:
    """One observation per step whose period is known (module docstring), in the order they ran."""
    ordered = sorted(records, key=lambda record: float(record["done_s"]))
    starts = [float(record["done_s"]) - float(record["model_s"]) for record in ordered]
    between: list[float | None] = []
    for index, record in enumerate(ordered):
        follows_at_once = int(record["pending"]) > 0 and index + 1 < len(ordered)
        between.append(max(starts[index + 1] - float(record["done_s"]), 0.0) if follows_at_once else None)
    known = [gap for gap in between if gap is not None]
    typical = statistics.median(known) if known else 0.0
    observations = []
    for record, gap in zip(ordered, between, strict=True):
        period = float(record["model_s"]) + (typical if gap is None else gap)
        if period <= 0:
            continue
        observations.append(
            StepObservation(
                int(record["prefill_tokens"]),
                int(record["prefill_context"]),
                int(record["decode_seqs"]),
                int(record["decode_context"]),
                (period,),
            )
        )
    return observations
