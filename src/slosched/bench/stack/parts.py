"""A ``bench stack`` run split over workloads, sessions or machines.

A full run of the five workloads on the steady-state method takes hours on two cores, longer than a working
session. Two environment variables let it be run in parts and assembled, with the same figures as one run:

- ``SLOSCHED_STACK_WORKLOADS=text2sql,chat``: measure only these workloads (the page and the JSON then
  hold only them, and the page names the ones left out).
- ``SLOSCHED_STACK_PARTS=DIR``: each finished workload's results (its scoreboard, sizes and wall time) are
  saved to ``DIR/{quick|full}-NAME.pkl`` as soon as it finishes, and a workload already saved there for the
  same mode and seeds is loaded instead of measured again. A run interrupted after three workloads resumes
  at the fourth; parts run on two machines assemble into one page by copying the files into one directory.
  A part saved for other seeds, job counts or judgement is measured again whole, and the run says so (and
  why) before it starts; a run asked to top parts up (``refresh.py``) refuses such a part instead.

A part is a pickle of this program's own result objects: it is read back only by the same code, and one that
no longer loads (the classes changed since it was written) fails naming the file, to be deleted and rerun.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from slosched.bench.stack.figures import WorkloadRun
from slosched.bench.stack.setup import StackWorkload
from slosched.core.errors import ConfigError
from slosched.evaluation.judgement import JUDGEMENT_NAME

WORKLOADS_ENV = "SLOSCHED_STACK_WORKLOADS"
PARTS_ENV = "SLOSCHED_STACK_PARTS"
Saved = TypeVar("Saved")


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
    saved = _read(part_path(directory, workload.name, quick))
    if saved is None or why_not_reused(saved, workload, quick, seeds) is not None:
        return None  # none, or measured another way: measured again (and overwritten)
    # The workload's definition comes from this code, not from the file: a part names what it measured.
    # A part saved before WorkloadRun gained topped_up lacks the slot: nothing was added to it yet.
    saved.workload, saved.loaded, saved.topped_up = workload, True, (0.0, 0.0)
    return saved


def stale_part(directory: Path, workload: StackWorkload, quick: bool, seeds: Sequence[int]) -> str | None:
    """Why the part saved for ``workload`` is not reused (so that a run says so before it measures the whole
    part again, hours on the slow workloads); None when there is no part or it loads."""
    saved = _read(part_path(directory, workload.name, quick))
    return None if saved is None else why_not_reused(saved, workload, quick, seeds)


def why_not_reused(saved: WorkloadRun, workload: StackWorkload, quick: bool, seeds: Sequence[int]) -> str | None:
    """What differs between the saved part and this run (seeds, job counts and rule, judgement), or None."""
    if tuple(saved.board.seeds) != tuple(seeds):
        return f"measured on seeds {list(saved.board.seeds)}, this run's are {list(seeds)}"
    sizes = workload.quick if quick else workload.full
    if saved.sizes != sizes:
        return f"measured at {saved.sizes}, this run's are {sizes}"
    judgement = getattr(saved, "judgement", None)
    if judgement != JUDGEMENT_NAME:
        return f"judged {judgement or 'before judgement.py'!r}, this code judges {JUDGEMENT_NAME!r}"
    return None


def _read(path: Path) -> WorkloadRun | None:
    """The part saved at ``path`` (None when there is none); a file that does not load fails naming it."""
    return read_saved(path, WorkloadRun, "bench stack part")


def read_saved(path: Path, kind: type[Saved], what: str) -> Saved | None:
    """The ``kind`` pickled at ``path`` (None when there is no file); one that does not load, or holds something
    else, fails naming the file (``what`` says what it should hold)."""
    if not path.exists():
        return None
    try:
        with path.open("rb") as handle:
            saved = pickle.load(handle)
    # Unpickling damaged bytes can raise almost anything (a bad opcode argument is a ValueError or KeyError).
    except (
        OSError,
        pickle.UnpicklingError,
        ValueError,
        KeyError,
        IndexError,
        AttributeError,
        ImportError,
        EOFError,
        TypeError,
    ) as error:
        raise ConfigError(PARTS_ENV, f"cannot read the saved {what} {path} ({error}); delete it to rerun") from None
    if not isinstance(saved, kind):
        raise ConfigError(PARTS_ENV, f"{path} holds no {what}; delete it to rerun")
    return saved


def write_atomically(path: Path, value: object) -> None:
    """Pickle ``value`` to ``path`` whole or not at all (a crash mid-write leaves the previous file or none)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".pkl.tmp")
    with partial.open("wb") as handle:
        pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
    partial.replace(path)


def save_part(directory: Path, run: WorkloadRun, quick: bool) -> Path:
    """Write ``run`` atomically (a crash mid-write leaves the previous part or none, never half of one)."""
    path = part_path(directory, run.workload.name, quick)
    write_atomically(path, replace(run, loaded=False, topped_up=(0.0, 0.0)))
    return path
