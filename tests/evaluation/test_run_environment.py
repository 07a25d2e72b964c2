"""``evaluation.run_environment``: what a cached task depends on besides the task, and what changed between two
environments (the cache's warning, tested through ``run_tasks`` in ``test_task_cache.py``)."""

from __future__ import annotations

from pathlib import Path

from slosched.evaluation import run_environment


def test_differences_name_each_change() -> None:
    old = run_environment.Environment("a", "3.11.7 (main)", ("numpy==1.0", "rich==13.0", "scipy==1.1"), "f1")
    new = run_environment.Environment("b", "3.12.1 (main)", ("numpy==2.0", "rich==13.0", "typer==0.1"), "f2")
    assert run_environment.differences(old, new) == [
        "Python 3.11.7 -> 3.12.1",
        "distributions installed since: typer==0.1",
        "distributions removed since: scipy==1.1",
        "versions changed: numpy 1.0 -> 2.0",
        "the slosched package's files differ",
    ]
    assert run_environment.differences(old, old) == []


def test_a_folder_records_each_environment_once_and_reports_only_the_first_time(tmp_path: Path) -> None:
    here = run_environment.current()
    assert run_environment.note(tmp_path) == ()  # an empty folder: nothing to compare with
    assert [p.name for p in (tmp_path / run_environment.ENVIRONMENTS).iterdir()] == [f"{here.digest}.json"]
    other = tmp_path / "other"
    (other / run_environment.ENVIRONMENTS).mkdir(parents=True)
    (other / run_environment.ENVIRONMENTS / "old.json").write_text("{not json")
    assert run_environment.note(other) == ("an earlier environment filled it (its description is unreadable)",)
    assert run_environment.note(other) == ()  # recorded now: its own tasks are reusable from here on
