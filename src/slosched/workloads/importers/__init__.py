"""Trace importers: users' request traces (Azure, BurstGPT, Mooncake, ShareGPT, Vidur) as slosched jobs.

Each format is a :class:`~slosched.workloads.importers.base.TraceImporter` registered here by name;
:func:`import_trace` reads one file and returns single-call jobs ready for ``trace_io.save_jobs``.

Invariants of the result: jobs are sorted by ``arrival_s`` (ties keep file order), the first arrives at 0,
ids are ``f"{format}-{i}"`` in that order, every job passed ``validate_job``; rows with zero prompt or zero
output tokens (failed or empty requests) are dropped and counted in ``skipped_zero``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec, validate_job
from slosched.workloads.importers.azure import AZURE_2023, AZURE_2024
from slosched.workloads.importers.base import TraceImporter, TraceRow
from slosched.workloads.importers.burstgpt import BURSTGPT
from slosched.workloads.importers.mooncake import MOONCAKE
from slosched.workloads.importers.sharegpt import SHAREGPT
from slosched.workloads.importers.vidur import VIDUR

__all__ = ["IMPORTERS", "ImportResult", "TraceImporter", "TraceRow", "format_names", "import_trace"]

IMPORTERS: Mapping[str, TraceImporter] = MappingProxyType(
    {importer.name: importer for importer in (AZURE_2023, AZURE_2024, BURSTGPT, MOONCAKE, SHAREGPT, VIDUR)}
)


def format_names() -> list[str]:
    return sorted(IMPORTERS)


@dataclass(slots=True, frozen=True)
class ImportResult:
    """The imported jobs; ``rows_read`` counts rows (calls) read, ``skipped_zero`` those dropped."""

    jobs: list[JobSpec]
    rows_read: int
    skipped_zero: int


def import_trace(
    fmt: str, path: str | os.PathLike[str], limit: int | None = None, rate_scale: float = 1.0
) -> ImportResult:
    """Jobs of the ``fmt`` trace at ``path``: at most ``limit`` rows (the first in file order), arrival
    times divided by ``rate_scale`` (2 = the same requests at twice the rate)."""
    if fmt not in IMPORTERS:
        raise UnknownNameError("--format", fmt, list(IMPORTERS))
    if limit is not None and limit < 1:
        raise ConfigError("--limit", f"must be >= 1, got {limit}")
    if not (math.isfinite(rate_scale) and rate_scale > 0):
        raise ConfigError("--rate-scale", f"must be a finite number > 0, got {rate_scale}")
    source = Path(path)
    if not source.is_file():
        raise ConfigError(str(source)[:200], "no such file")
    rows = list(IMPORTERS[fmt].rows(source, limit))
    kept = [row for row in rows if row.input_tokens > 0 and row.output_tokens > 0]
    kept.sort(key=lambda row: row.arrival_s)  # stable: ties keep file order
    start = kept[0].arrival_s if kept else 0.0
    jobs = [_job(f"{fmt}-{i}", (row.arrival_s - start) / rate_scale, row) for i, row in enumerate(kept)]
    for job, row in zip(jobs, kept, strict=True):
        try:
            validate_job(job)
        except ConfigError as error:
            raise ConfigError(f"{source} line {row.line}", str(error)) from None
    return ImportResult(jobs, len(rows), len(rows) - len(kept))


def _job(job_id: str, arrival_s: float, row: TraceRow) -> JobSpec:
    call = CallSpec(row.input_tokens, row.output_tokens, None, row.prefix_key, row.prefix_tokens, row.session_id)
    stage = StageSpec(row.template or "call", (call,))
    return JobSpec(job_id, JobKind.SINGLE, arrival_s, (stage,), tenant=row.tenant, template=row.template)
