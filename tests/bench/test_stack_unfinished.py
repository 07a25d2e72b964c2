"""A ``bench stack`` part measured over several sittings (``bench/stack/unfinished.py``): saved after each step
of the scoreboard, resumed from the step after it, to the figures of one uninterrupted run."""

from __future__ import annotations

import json
import pickle
from dataclasses import replace
from pathlib import Path

import pytest

import slosched.bench.stack.runs as stack
import slosched.bench.stack.unfinished as unfinished
import slosched.evaluation.overload as overload
from slosched.bench.stack.figures import WorkloadRun
from slosched.core.errors import ConfigError
from slosched.metrics.summary import json_safe
from tests.bench.test_stack_parts import STAND_IN, _tiny_quick_bench


class Stopped(Exception):
    """The sitting ends (a session over, a machine gone) right after a step was saved."""


def _stopping_after(monkeypatch: pytest.MonkeyPatch, steps: int) -> list[WorkloadRun]:
    saved: list[WorkloadRun] = []
    real = unfinished.save_unfinished

    def save(directory: Path, run: WorkloadRun, *, quick: bool) -> None:
        real(directory, run, quick=quick)
        saved.append(run)
        if len(saved) == steps:
            raise Stopped

    monkeypatch.setattr(unfinished, "save_unfinished", save)
    return saved


def _figures(row: dict[str, object]) -> str:
    kept = {key: value for key, value in row.items() if key not in {"wall_s", "cpu_s"}}
    return json.dumps(json_safe(kept), sort_keys=True)


def test_a_part_measured_over_sittings_resumes_after_each_stop_and_gives_the_uninterrupted_figures(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tiny_quick_bench(monkeypatch, tmp_path, STAND_IN)
    monkeypatch.setattr(overload, "CHECKPOINT_RUNS", 4)
    monkeypatch.setenv("SLOSCHED_STACK_PARTS", str(tmp_path / "whole"))
    whole = stack.run(quick=True)["workloads"]["code"]
    assert not list((tmp_path / "whole").glob("*.unfinished.pkl"))  # a finished part leaves none behind

    # Steps 1-3: the baseline rounds; 4: the stack's and its oracle's capacities; 5: their 4x runs; 6-15: the
    # overload runs, 4 at a time (40 in all). The sittings stop after steps 1, 4 (inside the baseline search, then
    # at its end), 5 and 9 (in the middle of the overload runs), each resumed from the one before, as a part
    # measured over several sessions is (one chain of sittings, about two runs' work, where four separate
    # stopped-and-resumed parts cost about five).
    directory = tmp_path / "sittings"
    path = directory / "quick-code.unfinished.pkl"
    last: WorkloadRun | None = None
    for steps in (1, 3, 1, 4):
        monkeypatch.undo()
        _tiny_quick_bench(monkeypatch, tmp_path, STAND_IN)
        monkeypatch.setattr(overload, "CHECKPOINT_RUNS", 4)
        monkeypatch.setenv("SLOSCHED_STACK_PARTS", str(directory))
        saved = _stopping_after(monkeypatch, steps)
        capsys.readouterr()
        with pytest.raises(Stopped):
            stack.run(quick=True)
        assert (f"resumed from {path}" in capsys.readouterr().out) == (last is not None)
        assert path.exists() and not (directory / "quick-code.pkl").exists()
        assert last is None or saved[-1].wall_s >= last.wall_s  # the time before each stop counts
        last = saved[-1]
    assert last is not None and len(last.board.overload_done) == 16  # the last stop: inside the overload runs
    monkeypatch.undo()
    _tiny_quick_bench(monkeypatch, tmp_path, STAND_IN)
    monkeypatch.setattr(overload, "CHECKPOINT_RUNS", 4)
    monkeypatch.setenv("SLOSCHED_STACK_PARTS", str(directory))
    resumed = stack.run(quick=True)["workloads"]["code"]
    assert f"resumed from {path}" in capsys.readouterr().out
    assert _figures(resumed) == _figures(whole)
    assert resumed["wall_s"] >= last.wall_s
    assert not path.exists()
    assert pickle.loads((directory / "quick-code.pkl").read_bytes()).board.overload_done == {}


def test_an_unfinished_part_of_other_code_or_another_mode_is_measured_whole(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tiny_quick_bench(monkeypatch, tmp_path, STAND_IN)
    directory = tmp_path / "parts"
    monkeypatch.setenv("SLOSCHED_STACK_PARTS", str(directory))
    _stopping_after(monkeypatch, 1)
    with pytest.raises(Stopped):
        stack.run(quick=True)
    path = directory / "quick-code.unfinished.pkl"
    held = pickle.loads(path.read_bytes())
    here = held.environment
    elsewhere = replace(here, digest="another", distributions=(*here.distributions, "numpy-ng==0.1"), files="x")
    path.write_bytes(pickle.dumps(unfinished.Unfinished(held.run, elsewhere)))
    workload = held.run.workload
    assert unfinished.load_unfinished(directory, workload, True, held.run.board.seeds) is None
    said = capsys.readouterr().out
    assert "not resumed (measured in another environment: distributions removed since: numpy-ng==0.1" in said
    assert "the slosched package's files differ; resume it from the commit that began it" in said
    assert unfinished.load_unfinished(directory, workload, True, (7, 8)) is None  # other seeds
    assert "not resumed (measured on seeds" in capsys.readouterr().out

    path.write_bytes(pickle.dumps({"not": "a part"}))
    with pytest.raises(ConfigError, match=r"SLOSCHED_STACK_PARTS.*holds no unfinished bench stack part"):
        unfinished.load_unfinished(directory, workload, True, held.run.board.seeds)
    path.write_bytes(b"garbage")
    with pytest.raises(ConfigError, match=r"cannot read .*quick-code\.unfinished\.pkl"):
        unfinished.load_unfinished(directory, workload, True, held.run.board.seeds)
