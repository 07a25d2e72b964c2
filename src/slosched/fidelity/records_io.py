"""Keep a fidelity case on disk: the trace, the real run and the simulated run, in one JSON file.

The benchmark's comparison can then be recomputed (and tested) from recorded data without an engine.
Records are written field by field (``dataclasses.asdict``); non-finite floats become ``null``.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from slosched.core.errors import ConfigError
from slosched.core.job import JobKind, JobSpec
from slosched.core.records import JobRecord, RequestRecord, RunResult
from slosched.core.request import Outcome
from slosched.workloads.trace_io import job_from_line, job_to_line

FORMAT = "slosched-fidelity-case"


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _run_to_dict(result: RunResult) -> dict[str, Any]:
    return {
        "policy": result.policy,
        "end_s": result.end_s,
        "requests": [{k: _plain(v) for k, v in asdict(r).items()} for r in result.requests],
        "jobs": [{k: _plain(v) for k, v in asdict(j).items()} for j in result.jobs],
    }


def _float(value: Any) -> float:
    if value is None:
        return math.nan
    return float(value)


def _record(cls: type, data: dict[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    for field in fields(cls):
        if field.name not in data:
            continue
        value = data[field.name]
        if field.name == "outcome":
            value = Outcome(value)
        elif field.name == "kind":
            value = JobKind(value)
        elif field.type in ("float", float) or (isinstance(value, str) and value in ("inf", "-inf")):
            value = _float(value)
        kwargs[field.name] = value
    return cls(**kwargs)


def _run_from_dict(data: dict[str, Any]) -> RunResult:
    return RunResult(
        str(data["policy"]),
        0,
        float(data["end_s"]),
        [_record(RequestRecord, r) for r in data["requests"]],
        [_record(JobRecord, j) for j in data["jobs"]],
    )


def save_run(path: Path, jobs: list[JobSpec], real: RunResult, sim: RunResult) -> Path:
    document = {
        "format": FORMAT,
        "jobs": [json.loads(job_to_line(job)) for job in jobs],
        "real": _run_to_dict(real),
        "sim": _run_to_dict(sim),
    }
    path.write_text(json.dumps(document, allow_nan=False) + "\n")
    return path


def load_run(path: Path) -> tuple[list[JobSpec], RunResult, RunResult]:
    """``(jobs, real, sim)`` of a saved case; a file of another kind raises ``ConfigError``."""
    try:
        document = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ConfigError("fidelity case", f"cannot read {path}: {error}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ConfigError("fidelity case", f"{path} is not a {FORMAT} file")
    jobs = [job_from_line(json.dumps(line), f"{path}: job {i}") for i, line in enumerate(document["jobs"])]
    return jobs, _run_from_dict(document["real"]), _run_from_dict(document["sim"])
