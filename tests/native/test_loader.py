"""The finder serves a build only while it matches every source it was built from."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from slosched.native import loader
from slosched.native.modules import COMPILED_MODULES, GROUP_MODULE
from slosched.native.sources import build_key, dependencies, file_digest, package_root


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    """A private copy of the package's sources (tests edit it)."""
    root = tmp_path / "src"
    shutil.copytree(package_root() / "slosched", root / "slosched", ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("SLOSCHED_NATIVE_DIR", str(folder))
    monkeypatch.delenv("SLOSCHED_NATIVE", raising=False)
    return folder


def _fake_build(sources: Path, cache: Path) -> Path:
    """A build folder as ``native build`` leaves it, with empty stand-ins for the extension files."""
    folder = cache / build_key(sources)
    files = {}
    for name in (*COMPILED_MODULES, GROUP_MODULE):
        relative = name.replace(".", "/") + ".so"
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(b"")
        files[name] = relative
    manifest = {"files": files, "depends": dependencies(sources)}
    (folder / loader.MANIFEST).write_text(json.dumps(manifest))
    return folder


def test_no_build_means_the_sources(sources: Path, cache: Path) -> None:
    status, files = loader.check_build(sources)
    assert not status.active and "no build" in status.reason and files == {}


def test_a_matching_build_is_served(sources: Path, cache: Path) -> None:
    folder = _fake_build(sources, cache)
    status, files = loader.check_build(sources)
    assert status.active and status.directory == folder
    assert files["slosched.sim.cluster"] == folder / "slosched/sim/cluster.so"


def test_an_edited_dependency_retires_the_build(sources: Path, cache: Path) -> None:
    _fake_build(sources, cache)
    request = sources / "slosched/core/request.py"
    request.write_text(request.read_text() + "\n# edited\n")
    status, files = loader.check_build(sources)
    assert not status.active and "slosched/core/request.py changed" in status.reason and files == {}


def test_an_edited_compiled_module_has_no_build(sources: Path, cache: Path) -> None:
    _fake_build(sources, cache)
    kernel = sources / "slosched/sim/kernel.py"
    kernel.write_text(kernel.read_text() + "\n# edited\n")
    status, _ = loader.check_build(sources)
    assert not status.active and "no build" in status.reason


def test_a_build_missing_a_module_is_not_used(sources: Path, cache: Path) -> None:
    folder = _fake_build(sources, cache)
    (folder / "slosched/sim/kv.so").unlink()
    status, _ = loader.check_build(sources)
    assert not status.active and "slosched.sim.kv" in status.reason


def test_an_unreadable_manifest_is_not_used(sources: Path, cache: Path) -> None:
    folder = _fake_build(sources, cache)
    (folder / loader.MANIFEST).write_text("{not json")
    status, _ = loader.check_build(sources)
    assert not status.active and "unreadable manifest" in status.reason


def test_switched_off_by_the_environment(sources: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_build(sources, cache)
    monkeypatch.setenv("SLOSCHED_NATIVE", "0")
    status, files = loader.check_build(sources)
    assert not status.active and "SLOSCHED_NATIVE=0" in status.reason and files == {}


def test_the_finder_answers_only_for_compiled_names(cache: Path) -> None:
    finder = loader._NativeFinder()
    assert finder.find_spec("slosched.core.request") is None
    assert finder.find_spec("slosched.sim.cluster") is None  # no build in this cache
    assert finder.status is not None and not finder.status.active


def test_dependencies_follow_imports_but_leave_out_compiled_modules() -> None:
    depends = dependencies(package_root())
    assert "slosched/core/request.py" in depends  # imported by sim/cluster.py
    assert "slosched/policies/engine/queue.py" in depends
    assert "slosched/__init__.py" in depends and "slosched/sim/__init__.py" in depends  # parent packages
    assert not any(path == f"{name.replace('.', '/')}.py" for name in COMPILED_MODULES for path in depends)
    assert not any(path.startswith("slosched/native/") for path in depends)  # the loader is not tracked
    root = package_root()
    assert all(file_digest(root / path) == digest for path, digest in depends.items())


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    from slosched.native.sources import _imports

    package = tmp_path / "slosched" / "sim"
    package.mkdir(parents=True)
    (tmp_path / "slosched" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "kv.py").write_text("")
    (package / "run.py").write_text("from . import kv\nfrom ..core.request import Request\nimport numpy\n")
    found = _imports(package / "run.py", "slosched.sim.decode_run", tmp_path)
    assert found == {"slosched", "slosched.sim", "slosched.sim.kv", "slosched.core", "slosched.core.request"}


def test_imports_inside_a_dependency_s_functions_are_not_followed(tmp_path: Path) -> None:
    """A dependency's lazy import runs only when called, and mypyc never reads it; a compiled module's
    function-local imports do type its compiled code."""
    from slosched.native.sources import _imports

    package = tmp_path / "slosched"
    (package / "client").mkdir(parents=True)
    for name in ("__init__.py", "client/__init__.py", "client/sdk.py", "views.py", "kv.py"):
        (package / name).write_text("")
    (package / "lazy.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from slosched import views\n"
        "class Holder:\n    from slosched import kv\n"
        "def client():\n    from slosched.client.sdk import Client\n    return Client\n"
    )
    followed = _imports(package / "lazy.py", "slosched.lazy", tmp_path, function_bodies=False)
    assert followed == {"slosched", "slosched.views", "slosched.kv"}
    everything = _imports(package / "lazy.py", "slosched.lazy", tmp_path)
    assert {"slosched.client", "slosched.client.sdk"} <= everything


def test_the_sdk_is_no_dependency_of_the_build() -> None:
    assert not any(path.startswith("slosched/client/") for path in dependencies(package_root()))
