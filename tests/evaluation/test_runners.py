"""``evaluation.runners``: results in task order in-process and across worker processes, and the
``SLOSCHED_BENCH_WORKERS`` override."""

from __future__ import annotations

import os
import time

import pytest

from slosched.core.errors import ConfigError
from slosched.evaluation.runners import run_tasks, worker_count


def square_late_first(task: int) -> tuple[int, int]:
    """Module-level (workers pickle it); early tasks finish last, so completion order is reversed."""
    time.sleep(0.02 * (4 - task) if task < 4 else 0.0)
    return task, os.getpid()


@pytest.mark.parametrize("workers", [1, 2])
def test_results_come_back_in_task_order(workers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLOSCHED_BENCH_WORKERS", raising=False)
    results = run_tasks(square_late_first, list(range(6)), "demo", workers=workers)
    assert [task for task, _ in results] == list(range(6))
    pids = {pid for _, pid in results}
    assert (os.getpid() in pids) is (workers == 1)  # in-process only with one worker


def test_no_tasks_and_one_task_run_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLOSCHED_BENCH_WORKERS", raising=False)
    assert run_tasks(square_late_first, [], "none", workers=4) == []
    assert run_tasks(square_late_first, [5], "one", workers=4) == [(5, os.getpid())]


def test_the_environment_overrides_the_worker_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLOSCHED_BENCH_WORKERS", raising=False)
    assert (worker_count(3), worker_count(0)) == (3, 1)
    for text, expected in (("1", 1), ("6", 6), (" 2 ", 2), ("", 3)):
        monkeypatch.setenv("SLOSCHED_BENCH_WORKERS", text)
        assert worker_count(3) == expected
    for text in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv("SLOSCHED_BENCH_WORKERS", text)
        with pytest.raises(ConfigError, match="SLOSCHED_BENCH_WORKERS") as caught:
            worker_count(3)
        assert repr(text.strip()) in str(caught.value)
    monkeypatch.setenv("SLOSCHED_BENCH_WORKERS", "1")
    results = run_tasks(square_late_first, [0, 1, 2], "forced in-process", workers=2)
    assert results == [(0, os.getpid()), (1, os.getpid()), (2, os.getpid())]


def test_without_a_terminal_progress_is_a_line_a_while(capsys: pytest.CaptureFixture[str]) -> None:
    from rich.console import Console

    from slosched.evaluation.runners import LoggedProgress, progress_bar

    assert isinstance(progress_bar(), LoggedProgress)  # pytest's stderr is no terminal
    quiet = LoggedProgress(Console(stderr=True), every_s=3600.0)
    with quiet:
        bar = quiet.add_task("short", total=3)
        for _ in range(3):
            quiet.advance(bar)
    assert capsys.readouterr().err == ""  # a task shorter than the interval says nothing
    chatty = LoggedProgress(Console(stderr=True), every_s=0.0)
    with chatty:
        bar = chatty.add_task("long", total=2)
        chatty.advance(bar)
        chatty.advance(bar)
        open_ended = chatty.add_task("runs", total=None)
        chatty.advance(open_ended)
    assert capsys.readouterr().err.splitlines() == ["long: 1/2 (0:00:00)", "long: 2/2 (0:00:00)", "runs: 1 (0:00:00)"]
