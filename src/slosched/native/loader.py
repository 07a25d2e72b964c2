"""Serves the compiled modules in place of their sources, only while the build matches every source.

``activate`` puts a finder first on ``sys.meta_path``. The first time a compiled module is imported it
looks for the build named by the current sources' key and checks the hash of every dependency in its
manifest; from then on it answers for the compiled names with the build's extension files, or (no build,
a stale one, ``SLOSCHED_NATIVE=0``) leaves them to the normal import of the ``.py`` sources.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from slosched.native.modules import COMPILED_MODULES, GROUP_MODULE
from slosched.native.sources import build_key, file_digest, package_root

MANIFEST = "manifest.json"
_SERVED = frozenset((*COMPILED_MODULES, GROUP_MODULE))


@dataclass(frozen=True, slots=True)
class NativeStatus:
    """Whether the compiled modules are used, and why (or why not)."""

    active: bool
    reason: str
    key: str
    directory: Path

    def as_json(self) -> dict[str, object]:
        return {"active": self.active, "reason": self.reason, "key": self.key, "directory": str(self.directory)}


def cache_root() -> Path:
    configured = os.environ.get("SLOSCHED_NATIVE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "slosched" / "native"


def disabled() -> bool:
    return os.environ.get("SLOSCHED_NATIVE", "1").strip().lower() in {"0", "off", "false", "no"}


def check_build(root: Path | None = None) -> tuple[NativeStatus, dict[str, Path]]:
    """The status of the build for the current sources, and its files by module name when it is usable."""
    source_root = package_root() if root is None else root
    key = build_key(source_root)
    directory = cache_root() / key
    if disabled():
        return NativeStatus(False, "turned off by SLOSCHED_NATIVE=0", key, directory), {}
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        return NativeStatus(False, "no build for these sources (run `slosched native build`)", key, directory), {}
    try:
        manifest = json.loads(manifest_path.read_text())
        files = {name: directory / relative for name, relative in manifest["files"].items()}
        depends: dict[str, str] = manifest["depends"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return NativeStatus(False, f"unreadable manifest {manifest_path}: {exc}", key, directory), {}
    missing = sorted(name for name in _SERVED if name not in files or not files[name].is_file())
    if missing:
        return NativeStatus(False, f"build lacks {', '.join(missing)}", key, directory), {}
    for relative, digest in depends.items():
        source = source_root / relative
        if not source.is_file() or file_digest(source) != digest:
            return NativeStatus(False, f"stale: {relative} changed since the build", key, directory), {}
    return NativeStatus(True, "compiled modules in use", key, directory), files


class _NativeFinder(importlib.abc.MetaPathFinder):
    """Answers for the compiled names only; checks the build once, at the first of them."""

    def __init__(self) -> None:
        self.files: dict[str, Path] | None = None
        self.status: NativeStatus | None = None

    def resolve(self) -> dict[str, Path]:
        if self.files is None:
            try:
                self.status, self.files = check_build()
            except OSError as exc:  # an unreadable source or cache: run the sources
                self.status = NativeStatus(False, f"cannot check the build: {exc}", "", cache_root())
                self.files = {}
        return self.files

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _SERVED:
            return None
        file = self.resolve().get(fullname)
        if file is None:
            return None
        return importlib.util.spec_from_file_location(fullname, file)


_finder = _NativeFinder()


def activate() -> None:
    """Install the finder (once). Cheap: nothing is read until a compiled module is first imported."""
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def native_status(fresh: bool = False) -> NativeStatus:
    """What the finder decided for this process (or would decide now, if no compiled module was imported
    yet); ``fresh`` checks the cache again instead (after a build, for the next process)."""
    if not fresh and _finder in sys.meta_path:
        _finder.resolve()
        if _finder.status is not None:
            return _finder.status
    return check_build()[0]


def is_compiled(module: ModuleType) -> bool:
    """True when ``module`` was loaded from an extension file (the compiled build)."""
    file = getattr(module, "__file__", None) or ""
    return any(file.endswith(suffix) for suffix in importlib.machinery.EXTENSION_SUFFIXES)
