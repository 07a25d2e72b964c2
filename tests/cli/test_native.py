"""``slosched native status | build``: the state as text or JSON; a failed build is one ``error:`` line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slosched.cli.main import run
from slosched.native import build as native_build


def test_status_json_names_the_state(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLOSCHED_NATIVE", "0")
    assert run(["native", "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert status["active"] is False and "SLOSCHED_NATIVE=0" in status["reason"]
    assert set(status) == {"active", "reason", "key", "directory"}


def test_a_failed_build_is_one_error_line_and_leaves_no_build(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SLOSCHED_NATIVE_DIR", str(tmp_path))
    monkeypatch.setattr(native_build, "_CHILD", "import sys; print('mypyc: error: boom'); sys.exit(1)")
    assert run(["native", "build", "--force"]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: mypyc build failed (mypyc: error: boom)"), lines
    assert "last-build.log" in err and "Traceback" not in err
    assert [path.name for path in tmp_path.iterdir()] == ["last-build.log"]  # nothing half-built


def test_a_build_lands_whole_with_its_manifest(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The staging and the manifest, with the compiler replaced by empty stand-in extension files."""
    import importlib.machinery

    from slosched.native import loader
    from slosched.native.modules import COMPILED_MODULES, GROUP_MODULE

    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]

    def fake_compile(sources: Path, scratch: Path, lib: Path, jobs: int) -> None:
        for name in (*COMPILED_MODULES, GROUP_MODULE):
            path = lib / (name.replace(".", "/") + suffix)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")

    monkeypatch.setenv("SLOSCHED_NATIVE_DIR", str(tmp_path))
    monkeypatch.delenv("SLOSCHED_NATIVE", raising=False)
    monkeypatch.setattr(native_build, "_compile", fake_compile)
    target = native_build.build(force=True)
    assert [path.name for path in tmp_path.iterdir()] == [target.name]  # no staging folder left behind
    status, files = loader.check_build()
    assert status.active and status.directory == target
    assert files["slosched.sim.cluster"] == target / f"slosched/sim/cluster{suffix}"
    manifest = json.loads((target / loader.MANIFEST).read_text())
    assert "slosched/core/request.py" in manifest["depends"] and manifest["key"] == target.name
