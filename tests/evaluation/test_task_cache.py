"""``evaluation.task_cache`` through ``runners.run_tasks``: a rerun takes finished tasks from the cache, a
stopped run keeps what it finished, and nothing stale or unreadable is ever taken."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

import slosched.evaluation.task_cache as task_cache
from slosched.core.errors import ConfigError, Interrupted
from slosched.evaluation import run_environment
from slosched.evaluation.runners import run_tasks

ROOT = Path(__file__).resolve().parents[2]
CALLS: list[int] = []


def record_and_square(task: int) -> int:
    """Module-level (workers pickle it); notes in-process calls so a test can tell a hit from a run."""
    CALLS.append(task)
    return task * task


def stop_at_three(task: int) -> int:
    if task == 3:
        raise KeyboardInterrupt
    CALLS.append(task)
    return task * task


def pid_of(task: int) -> int:
    return os.getpid() + 0 * task


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SLOSCHED_BENCH_WORKERS", "1")
    monkeypatch.setenv(task_cache.CACHE_ENV, str(tmp_path / "tasks"))
    CALLS.clear()
    return tmp_path / "tasks"


def test_a_rerun_takes_every_finished_task_from_the_cache(cache_dir: Path) -> None:
    assert run_tasks(record_and_square, [1, 2, 3], "first") == [1, 4, 9]
    assert CALLS == [1, 2, 3] and len(list(cache_dir.glob("*.pkl"))) == 3
    CALLS.clear()
    assert run_tasks(record_and_square, [3, 4, 1], "again") == [9, 16, 1]
    assert CALLS == [4]  # only the new task ran


def test_a_stopped_run_keeps_what_it_finished(cache_dir: Path) -> None:
    with pytest.raises(Interrupted) as stopped:
        run_tasks(stop_at_three, [1, 2, 3, 4], "stopped")
    assert stopped.value.partial == [1, 4, None, None]
    CALLS.clear()
    assert run_tasks(stop_at_three, [1, 2], "resumed") == [1, 4]
    assert CALLS == []  # both came from the cache


def _digest() -> str:
    return "another code version"


def test_another_code_version_misses(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_tasks(record_and_square, [5], "first")
    CALLS.clear()
    monkeypatch.setattr(task_cache, "code_digest", _digest)
    assert run_tasks(record_and_square, [5], "after an edit") == [25]
    assert CALLS == [5]


def test_an_unreadable_entry_runs_again_and_an_unpicklable_task_is_never_cached(cache_dir: Path) -> None:
    run_tasks(record_and_square, [6], "first")
    (entry,) = cache_dir.glob("*.pkl")
    entry.write_bytes(b"not a pickle")
    CALLS.clear()
    assert run_tasks(record_and_square, [6], "again") == [36] and CALLS == [6]
    cache = task_cache.TaskCache(cache_dir, record_and_square)
    assert cache.key(lambda: 0) is None
    assert cache.get(None) == (False, None)


def test_worker_processes_fill_the_cache_too(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLOSCHED_BENCH_WORKERS", "2")
    first = run_tasks(pid_of, [1, 2, 3], "in workers")
    assert os.getpid() not in first
    assert run_tasks(pid_of, [1, 2, 3], "from the cache") == first  # the workers' answers, not this process's


def test_the_key_depends_on_the_task_and_the_function(tmp_path: Path) -> None:
    squares, pids = task_cache.TaskCache(tmp_path, record_and_square), task_cache.TaskCache(tmp_path, pid_of)
    assert squares.key(1) == squares.key(1) != squares.key(2)
    assert squares.key(1) != pids.key(1)


def test_one_task_has_one_key_whatever_the_interpreter_seeds_its_string_hash_with(tmp_path: Path) -> None:
    """A scenario (pydantic: it carries the set of its fields) keyed in two interpreters with other hash seeds."""
    script = (
        "from pathlib import Path; import slosched.evaluation.task_cache as c; "
        "from slosched.scenario.config import load_scenario; "
        "print(c.TaskCache(Path('.'), len).key((load_scenario('examples/demo.yaml'), {'b', 'a', 'c'})))"
    )
    keys = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2", "3")
    }
    assert len(keys) == 1 and len(next(iter(keys))) == 64


def test_a_folder_that_cannot_be_made_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(task_cache.CACHE_ENV, str(blocker / "tasks"))
    with pytest.raises(ConfigError, match=task_cache.CACHE_ENV):
        run_tasks(record_and_square, [1], "bad folder")


def test_the_tally_counts_tasks_taken_from_the_cache_and_run_and_a_page_says_so(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(task_cache.TALLY, "from_cache", 0)  # the process's tally, as the runner holds it
    monkeypatch.setattr(task_cache.TALLY, "run", 0)
    run_tasks(record_and_square, [1, 2], "first")
    assert task_cache.TALLY.figures() == {"from_cache": 0, "run": 2}
    assert task_cache.resumed_note(task_cache.TALLY.figures()) == ""  # nothing resumed: no clause
    run_tasks(record_and_square, [2, 1, 5], "resumed")
    assert task_cache.TALLY.figures() == {"from_cache": 2, "run": 3}
    note = task_cache.resumed_note(task_cache.TALLY.figures())
    assert "2 of 5 tasks came from `SLOSCHED_TASK_CACHE`" in note
    assert task_cache.resumed_note(None) == ""  # figures of a run from before the tally


def test_a_cache_filled_in_another_environment_says_what_changed(
    cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A package installed between two sittings misses every entry (the key sees every distribution): the
    run says so once, naming the difference, instead of silently starting over."""
    here = run_environment.current()
    earlier = {**asdict(here), "digest": "earlier", "distributions": [*here.distributions[1:], "zzz-gone==1.0"]}
    (cache_dir / run_environment.ENVIRONMENTS).mkdir(parents=True)
    (cache_dir / run_environment.ENVIRONMENTS / "earlier.json").write_text(json.dumps(earlier))
    run_tasks(record_and_square, [7], "first")
    run_tasks(record_and_square, [8], "second")
    warning = capsys.readouterr().err
    assert warning.count("warning: the task cache") == 1, warning
    assert f"installed since: {here.distributions[0]}" in warning and "removed since: zzz-gone==1.0" in warning
    assert (cache_dir / run_environment.ENVIRONMENTS / f"{here.digest}.json").exists()


def test_the_environment_that_filled_a_cache_is_recorded_and_no_warning_follows(
    cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_tasks(record_and_square, [9], "first")
    (recorded,) = (cache_dir / run_environment.ENVIRONMENTS).glob("*.json")
    assert json.loads(recorded.read_text())["digest"] == task_cache.code_digest()
    assert "warning" not in capsys.readouterr().err
