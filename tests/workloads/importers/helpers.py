"""Shared checks of the importer tests: the bundled samples and the invariants every import keeps."""

from __future__ import annotations

from pathlib import Path

from slosched.core.job import JobKind, JobSpec
from slosched.workloads import importers
from slosched.workloads.trace_io import load_jobs, save_jobs

SAMPLES = Path(importers.__file__).parent.parent / "data" / "samples"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def check_jobs(jobs: list[JobSpec], fmt: str, tmp_path: Path) -> None:
    """Sorted arrivals from 0, ids in order, single calls, and a lossless JSONL round trip."""
    times = [job.arrival_s for job in jobs]
    assert times[0] == 0.0 and times == sorted(times)
    assert [job.id for job in jobs] == [f"{fmt}-{i}" for i in range(len(jobs))]
    assert all(job.kind is JobKind.SINGLE and job.num_calls == 1 for job in jobs)
    save_jobs(tmp_path / "jobs.jsonl", jobs)
    assert load_jobs(tmp_path / "jobs.jsonl") == jobs


def calls(jobs: list[JobSpec]) -> list[tuple[int, int]]:
    return [(job.stages[0].calls[0].input_tokens, job.stages[0].calls[0].output_tokens) for job in jobs]
