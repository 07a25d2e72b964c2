"""``slosched native status | build``: the state as text or JSON; a failed build is one ``error:`` line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slosched.cli import run
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
