"""What a task cache's results depend on besides the tasks, and which environment filled a cache folder.

A cached task is reused only in the environment that ran it (``task_cache``): the ``slosched`` package's
files, the Python version and every installed distribution's version. A long bench resumed in another
environment therefore reruns everything, silently: a test-only package installed into the environment between
two sittings of a bench set a Text-to-SQL part 5 hours in back to its start, and nothing said why (it was
caught by chance, 13 minutes on). So each
environment that writes to a folder leaves its description there (``environments/<digest>.json``), and a run
that finds only other environments' descriptions says, once, what differs from the newest of them.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

# Build products beside the sources that say nothing the sources do not.
_SKIPPED_SUFFIXES = (".pyc", ".so", ".pyd", ".c", ".h", ".o")
ENVIRONMENTS = "environments"


@dataclass(frozen=True, slots=True)
class Environment:
    """``digest`` keys the cache; the rest say what went into it (``files``: the package files' digest)."""

    digest: str
    python: str
    distributions: tuple[str, ...]
    files: str


@functools.cache
def current() -> Environment:
    """This process's environment: every file of the installed ``slosched`` package (relative path and bytes,
    sorted), the Python version and the installed distributions' versions."""
    root = Path(__file__).resolve().parent.parent
    installed = tuple(sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()))
    digest = hashlib.sha256("\n".join([sys.version, *installed]).encode())
    files = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in _SKIPPED_SUFFIXES:
            entry = path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0"
            digest.update(entry)
            files.update(entry)
    return Environment(digest.hexdigest(), sys.version, installed, files.hexdigest())


def differences(old: Environment, new: Environment) -> list[str]:
    """What changed from ``old`` to ``new``, one clause each (empty: nothing that the cache key sees)."""
    before = dict(item.split("==", 1) for item in old.distributions)
    after = dict(item.split("==", 1) for item in new.distributions)
    clauses = []
    if old.python != new.python:
        clauses.append(f"Python {old.python.split()[0]} -> {new.python.split()[0]}")
    if added := sorted(f"{name}=={after[name]}" for name in after.keys() - before.keys()):
        clauses.append("distributions installed since: " + ", ".join(added))
    if removed := sorted(f"{name}=={before[name]}" for name in before.keys() - after.keys()):
        clauses.append("distributions removed since: " + ", ".join(removed))
    both = before.keys() & after.keys()
    if changed := sorted(f"{name} {before[name]} -> {after[name]}" for name in both if before[name] != after[name]):
        clauses.append("versions changed: " + ", ".join(changed))
    if old.files != new.files:
        clauses.append("the slosched package's files differ")
    return clauses


def note(root: Path) -> tuple[str, ...]:
    """Record this environment in cache folder ``root``; when the folder held only other environments' tasks,
    what differs from the newest of them (empty otherwise, and once this environment is recorded)."""
    here = current()
    folder = root / ENVIRONMENTS
    folder.mkdir(parents=True, exist_ok=True)
    own = folder / f"{here.digest}.json"
    if own.exists():
        return ()
    others = sorted(folder.glob("*.json"), key=lambda path: path.stat().st_mtime)
    _write(own, here)
    if not others:
        return ()
    try:
        data = json.loads(others[-1].read_text())
        newest = Environment(data["digest"], data["python"], tuple(data["distributions"]), data["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return ("an earlier environment filled it (its description is unreadable)",)
    return tuple(differences(newest, here)) or ("an earlier environment filled it",)


def _write(path: Path, environment: Environment) -> None:
    """Whole or not at all (a temporary file renamed into place), as the cache's own entries."""
    handle, temporary = tempfile.mkstemp(prefix=".environment-", dir=path.parent)
    with os.fdopen(handle, "w") as file:
        json.dump(asdict(environment), file, indent=1)
    os.replace(temporary, path)
