"""A ``bench stack`` run split over workloads, sessions or machines.

A full run of the five workloads on the steady-state method takes hours on two cores, longer than a working
session. Two environment variables let it be run in parts and assembled, with the same figures as one run:

- ``SLOSCHED_STACK_WORKLOADS=text2sql,chat``: measure only these workloads (the page and the JSON then
  hold only them, and the page names the ones left out).
- ``SLOSCHED_STACK_PARTS=DIR``: each finished workload's results (its scoreboard, sizes and wall time) are
  saved to ``DIR/{quick|full}-NAME.pkl`` as soon as it finishes, and a workload already saved there for the
  same mode and seeds is loaded instead of measured again. A run interrupted after three workloads resumes
  at the fourth; parts run on two machines assemble into one page by copying the files into one directory.

A part is a pickle of this program's own result objects: it is read back only by the same code, and one that
no longer loads (the classes changed since it was written) fails naming the file, to be deleted and rerun.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from slosched.bench.stack.figures import WorkloadRun
from slosched.bench.stack.setup import StackWorkload
from slosched.core.errors import ConfigError
from slosched.evaluation.judgement import JUDGEMENT_NAME

WORKLOADS_ENV = "SLOSCHED_STACK_WORKLOADS"
PARTS_ENV = "SLOSCHED_STACK_PARTS"


def chosen_workloads(every: Sequence[StackWorkload]) -> tuple[StackWorkload, ...]:
    """The workloads ``SLOSCHED_STACK_WORKLOADS`` names, in the bench's order (all when it is unset or
    empty); an unknown name is a ``ConfigError`` naming the allowed ones."""
    text = os.environ.get(WORKLOADS_ENV, "").strip()
    if not text:
        return tuple(every)
    names = [name.strip() for name in text.split(",") if name.strip()]
    allowed = [workload.name for workload in every]
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise ConfigError(WORKLOADS_ENV, f"unknown workload(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
    return tuple(workload for workload in every if workload.name in names)


def parts_directory() -> Path | None:
    text = os.environ.get(PARTS_ENV, "").strip()
    return Path(text) if text else None


def part_path(directory: Path, name: str, quick: bool) -> Path:
    return directory / f"{'quick' if quick else 'full'}-{name}.pkl"


def load_part(directory: Path, workload: StackWorkload, quick: bool, seeds: Sequence[int]) -> WorkloadRun | None:
    """The saved run of ``workload`` (same mode and seeds), or None when there is none to reuse."""
    path = part_path(directory, workload.name, quick)
    if not path.exists():
        return None
    try:
        with path.open("rb") as handle:
            saved = pickle.load(handle)
    except (OSError, pickle.UnpicklingError, AttributeError, ImportError, EOFError, TypeError) as error:
        raise ConfigError(PARTS_ENV, f"cannot read the saved part {path} ({error}); delete it to rerun") from None
    if not isinstance(saved, WorkloadRun):
        raise ConfigError(PARTS_ENV, f"{path} holds no bench stack part; delete it to rerun")
    if tuple(saved.board.seeds) != tuple(seeds) or saved.sizes != (workload.quick if quick else workload.full):
        return None  # measured on other seeds or job counts: measured again (and overwritten)
    if getattr(saved, "judgement", None) != JUDGEMENT_NAME:
        return None  # its runs were judged another way (before ``judgement.py``): measured again
    # The workload's definition comes from this code, not from the file: a part names what it measured.
    # A part saved before WorkloadRun gained topped_up lacks the slot: nothing was added to it yet.
    saved.workload, saved.loaded, saved.topped_up = workload, True, (0.0, 0.0)
    return saved


def save_part(directory: Path, run: WorkloadRun, quick: bool) -> Path:
    """Write ``run`` atomically (a crash mid-write leaves the previous part or none, never half of one)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = part_path(directory, run.workload.name, quick)
    partial = path.with_suffix(".pkl.tmp")
    with partial.open("wb") as handle:
        pickle.dump(replace(run, loaded=False, topped_up=(0.0, 0.0)), handle, protocol=pickle.HIGHEST_PROTOCOL)
    partial.replace(path)
    return path
