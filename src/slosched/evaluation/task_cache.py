"""Finished evaluation tasks kept on disk, so that a long bench stopped part-way resumes where it stopped.

A full paper bench on the steady-state method runs for hours on a small machine (``bench hexgen`` and
``bench nexus`` did not finish in a 2.5-hour sitting on two cores), and a stopped run used to lose every
capacity search it had finished. With ``SLOSCHED_TASK_CACHE=DIR`` each task ``runners.run_tasks`` finishes
is written to ``DIR`` under a key, and a later run of the same command takes it from there instead of
running it again.

The key is a digest of the task function's name, the task itself (pickled: the workbench, candidate,
seed, rate and search a capacity task carries) and everything else its result depends on: every file of
the ``slosched`` package as it is now (sources and data; compiled modules give the same records as the
sources, so they are left out), the Python version and every installed distribution's version (the
workloads read data shipped in some; ``run_environment.py``). Any change to the code or the environment
therefore misses the cache (a run says so, and what changed, when the folder holds only another
environment's tasks), and a hit is what running the task again would return: every task is deterministic by
its seed. What the key cannot see: module globals patched at run time (tests do this; ``tests/conftest.py``
unsets the variable) and environment variables read inside a task rather than when it is built (the
benches read theirs into their plans). A task that cannot be pickled is simply run. Files are written
whole (a temporary file renamed into place), so a run killed mid-write leaves no half entry behind.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slosched.core.errors import ConfigError
from slosched.evaluation import run_environment

CACHE_ENV = "SLOSCHED_TASK_CACHE"


def code_digest() -> str:
    """What a task's result depends on besides the task (``run_environment.current``), as one digest."""
    return run_environment.current().digest


class _CanonicalPickler(pickle._Pickler):
    """Pickles a set in sorted order, so that one task has one key in every process: a set's order follows
    the string hash, which each interpreter seeds anew (pydantic models, a scenario's among them, carry the
    set of their fields). The pure-Python pickler, because the C one never asks ``reducer_override`` about a
    set."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) in (set, frozenset):
            return type(obj), (sorted(obj, key=repr),)
        return NotImplemented


@dataclass(slots=True)
class CacheTally:
    """Tasks of this process's ``run_tasks`` calls with the cache set: taken from it, and run now. A resumed
    bench's wall time counts only the tasks run now, so its figures carry the tally (``figures``) and its
    page says how many came from the cache (``resumed_note``): a bench that printed 485 s for the last
    8 minutes of a two-hour run read as a fast bench."""

    from_cache: int = 0
    run: int = 0

    def figures(self) -> dict[str, int]:
        return {"from_cache": self.from_cache, "run": self.run}


TALLY = CacheTally()


def resumed_note(tally: Mapping[str, int] | None) -> str:
    """A clause for a page's wall-time line when some of a run's tasks (``CacheTally.figures``) came from the
    cache, else ``""``."""
    from_cache = (tally or {}).get("from_cache", 0)
    if not from_cache:
        return ""
    total = from_cache + (tally or {}).get("run", 0)
    return (
        f"; resumed: {from_cache} of {total} tasks came from `{CACHE_ENV}`, finished by earlier runs whose "
        "time is not counted here"
    )


class TaskCache:
    """Results of ``fn`` by task, in one folder (one file per finished task)."""

    def __init__(self, root: Path, fn: Callable[..., Any]) -> None:
        self.root = root
        self.name = f"{fn.__module__}.{fn.__qualname__}"

    def key(self, task: Any) -> str | None:
        """The task's key, or None when it cannot be pickled (it is then run, never cached)."""
        buffer = io.BytesIO()
        try:
            _CanonicalPickler(buffer, protocol=5).dump(task)
        except (pickle.PicklingError, TypeError, AttributeError):
            return None
        payload = buffer.getvalue()
        digest = hashlib.sha256(code_digest().encode() + b"\0" + self.name.encode() + b"\0" + payload)
        return digest.hexdigest()

    def get(self, key: str | None) -> tuple[bool, Any]:
        """(found, result); an unreadable entry counts as not found (the task runs again)."""
        if key is None:
            return False, None
        try:
            with (self.root / f"{key}.pkl").open("rb") as file:
                return True, pickle.load(file)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            return False, None

    def put(self, key: str | None, result: Any) -> None:
        if key is None:
            return
        handle, temporary = tempfile.mkstemp(prefix=f".{key}-", dir=self.root)
        try:
            with os.fdopen(handle, "wb") as file:
                pickle.dump(result, file, protocol=5)
            os.replace(temporary, self.root / f"{key}.pkl")
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def task_cache(fn: Callable[..., Any]) -> TaskCache | None:
    """The cache ``SLOSCHED_TASK_CACHE`` names for ``fn``'s tasks (None when it is unset or empty); the folder
    is created; one that cannot be is a ``ConfigError`` naming the variable."""
    text = os.environ.get(CACHE_ENV, "").strip()
    if not text:
        return None
    root = Path(text)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(CACHE_ENV, f"cannot use {text!r} as the task cache folder: {error.strerror}") from None
    _check_environment(root)
    return TaskCache(root, fn)


@functools.cache
def _check_environment(root: Path) -> None:
    """Record this environment in ``root`` and warn, once per folder and process, when the folder holds only
    another environment's tasks (none will be reused, ``run_environment.note``)."""
    try:
        changed = run_environment.note(root)
    except OSError:  # a folder it cannot write to: the cache's own writes will say so, naming the entry
        return
    if changed:
        print(
            f"warning: the task cache {root} was filled in another environment; none of its tasks can be reused "
            f"({'; '.join(changed)})",
            file=sys.stderr,
            flush=True,
        )
