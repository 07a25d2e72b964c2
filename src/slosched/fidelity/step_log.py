"""Measured engine steps from the scheduler plugin's step timing file (``step_timing_file``).

The plugin writes one line per completed step: its shape, when its model step ended (``done_s``), how long
the model step ran (``model_s``) and how many requests were still running or waiting after it
(``pending``). A simulated step is the engine's whole period, from one step's start to the next's: the
model step plus the engine core's own work in between (finishing outputs, taking in new requests,
scheduling), which the model step alone leaves out and which grows with what arrives. So a step followed
at once by another (``pending`` > 0: vLLM loops straight on) lasts until the next one starts; a step
after which the engine went idle gets the median of those in-between times instead (its gap is idle
time, not work).

With the plugin's ``speed_probe_interval_s`` the file also holds probe lines (``probe_s``, ``done_s``: a
fixed CPU workload the engine timed between two steps, ``perf.speed_probe``). ``speed_probes`` reads them;
a probe's own time is taken out of the period of the step it followed.
"""

from __future__ import annotations

import bisect
import itertools
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


def speed_probes(records: Sequence[dict[str, Any]]) -> list[tuple[float, float]]:
    """``(done_s, probe_s)`` of every speed probe in ``records``, in time order."""
    return sorted((float(record["done_s"]), float(record["probe_s"])) for record in records if "probe_s" in record)


def step_observations(records: Sequence[dict[str, Any]]) -> list[StepObservation]:
    """One observation per step whose period is known (module docstring), in the order they ran."""
    return [observation for _, observation in timed_steps(records)]


def timed_steps(records: Sequence[dict[str, Any]]) -> list[tuple[float, StepObservation]]:
    """``step_observations`` with when each step's model step ended (``done_s``, perf_counter)."""
    probes = speed_probes(records)
    probe_ends = [done for done, _ in probes]
    probed_before = list(itertools.accumulate((probe_s for _, probe_s in probes), initial=0.0))
    ordered = sorted((record for record in records if "model_s" in record), key=lambda record: float(record["done_s"]))
    starts = [float(record["done_s"]) - float(record["model_s"]) for record in ordered]
    between: list[float | None] = []
    for index, record in enumerate(ordered):
        follows_at_once = int(record["pending"]) > 0 and index + 1 < len(ordered)
        if not follows_at_once:
            between.append(None)
            continue
        done, next_start = float(record["done_s"]), starts[index + 1]
        probed = (
            probed_before[bisect.bisect_right(probe_ends, next_start)]
            - probed_before[bisect.bisect_right(probe_ends, done)]
        )
        between.append(max(next_start - done - probed, 0.0))
    known = [gap for gap in between if gap is not None]
    typical = statistics.median(known) if known else 0.0
    observations: list[tuple[float, StepObservation]] = []
    for record, gap in zip(ordered, between, strict=True):
        period = float(record["model_s"]) + (typical if gap is None else gap)
        if period <= 0:
            continue
        observations.append(
            (
                float(record["done_s"]),
                StepObservation(
                    int(record["prefill_tokens"]),
                    int(record["prefill_context"]),
                    int(record["decode_seqs"]),
                    int(record["decode_context"]),
                    (period,),
                ),
            )
        )
    return observations
