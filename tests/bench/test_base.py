"""What every benchmark shares: Ctrl-C keeps the rows that finished (``run_keeping_rows``), the CLI prints
them marked partial, writes no report page and exits 130 within 2 s, leaving no worker behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import slosched.bench.registry as registry
from slosched.bench.base import Benchmark, partial_figures, run_keeping_rows
from slosched.cli.main import run
from slosched.core.errors import Interrupted
from slosched.evaluation.rows import row_finished
from tests.cli.test_interrupt import _group_alive

ROOT = Path(__file__).resolve().parents[2]


def _two_rows_then_ctrl_c(quick: bool) -> dict[str, Any]:
    row_finished("chat", {"capacity": 1.5, "strongest_baseline": "least-tokens+fcfs", "baselines": {"a": 1.0}})
    row_finished("code", {"capacity": 2.5})
    raise KeyboardInterrupt


def test_an_interrupted_run_raises_the_finished_rows_marked_partial() -> None:
    announced: list[str] = []
    with pytest.raises(Interrupted) as stop:
        run_keeping_rows(Benchmark("toy", "", _two_rows_then_ctrl_c), True, announced.append)
    assert stop.value.partial == partial_figures(
        "toy",
        True,
        {
            "chat": {"capacity": 1.5, "strongest_baseline": "least-tokens+fcfs", "baselines": {"a": 1.0}},
            "code": {"capacity": 2.5},
        },
    )
    assert stop.value.partial["partial"] is True and stop.value.partial["finished_rows"] == ["chat", "code"]
    assert announced == ["chat", "code"]
    # A run that finishes returns its figures as they are.
    assert run_keeping_rows(Benchmark("toy", "", lambda quick: {"done": quick}), False) == {"done": False}


@pytest.mark.parametrize("as_json", [True, False])
def test_the_cli_prints_the_finished_rows_and_exits_130(
    as_json: bool, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "get_benchmark", lambda name: Benchmark(name, "", _two_rows_then_ctrl_c))
    assert run(["bench", "stack", "--quick", *(["--json"] if as_json else [])]) == 130
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1] == (
        "error: interrupted: bench stack stopped with 2 rows finished: chat, code; their figures are shown, "
        "marked partial; no report written"
    )
    assert "bench stack: row 'chat' finished" in captured.err
    if as_json:
        document = json.loads(captured.out.strip().splitlines()[-1])
        assert document["partial"] is True and document["rows"]["code"] == {"capacity": 2.5}
    else:  # a table per row on stderr, its plain figures and those one level down
        assert "(partial: interrupted): chat" in captured.err and "baselines: a" in captured.err


# A real `slosched bench stack-limits --quick --json` (one seed, one overload): its first row (code at a
# low capacity) finishes in a second or two; its second (chat at a high one: runs of thousands of jobs) takes
# far longer than the test waits. Run through `main`, as the console script is.
_SCRIPT = textwrap.dedent(
    """
    import slosched.bench.stack_limits.runs as limits

    limits.QUICK_SEEDS, limits.OVERLOADS = (1,), (1.25,)  # forked workers inherit them
    from slosched.cli.main import main
    main(["bench", "stack-limits", "--quick", "--json"])
    """
)
_STRONGEST = "least-tokens+chunked-fcfs[token_budget=512]"


def _stack_row(capacity: float) -> dict[str, Any]:
    """A workload's row of a stack bench run, as stack-limits reads it."""
    return {
        "strongest_baseline": _STRONGEST,
        "capacity_rps": {_STRONGEST: capacity, "slosched": capacity},
        "ratio_vs_strongest": 1.0,
        "capacity_target": 1.2,
        "goodput_ratio_2x": 1.0,
        "strongest_per_load": {},
        "truth": ["vllm-v1"],
    }


def _start(tmp_path: Path) -> subprocess.Popen[str]:
    stack_json = tmp_path / "stack.json"
    stack_json.write_text(json.dumps({"workloads": {"code": _stack_row(0.5), "chat": _stack_row(400.0)}}))
    env = {**os.environ, "SLOSCHED_NATIVE": "0", "PYTHONPATH": str(ROOT / "src"), "SLOSCHED_BENCH_WORKERS": "2"}
    env["SLOSCHED_STACK_JSON"] = str(stack_json)
    return subprocess.Popen(
        [sys.executable, "-c", _SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
        start_new_session=True,
    )


def test_sigint_after_the_first_row_exits_130_within_2_s_with_that_row(tmp_path: Path) -> None:
    process = _start(tmp_path)
    errors: list[str] = []
    first_row = threading.Event()

    def read_stderr() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            errors.append(line)
            if "row 'code' finished" in line:
                first_row.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert first_row.wait(timeout=120), "".join(errors[-20:])
        time.sleep(0.5)  # the second row's runs are under way in the workers
        assert process.poll() is None, "finished before the signal: make the second row longer"
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # say what held it: the stderr tail and the group's processes
            group = subprocess.run(
                ["ps", "-o", "pid,ppid,stat,etime,args", "-g", str(process.pid)], capture_output=True, text=True
            )
            pytest.fail(f"no exit 30 s after SIGINT; group:\n{group.stdout}\nstderr tail:\n{''.join(errors[-20:])}")
        stopped_s = time.monotonic() - sent
        reader.join(timeout=5)
    finally:
        if _group_alive(process.pid):  # never leave a stray worker behind a failed test
            os.killpg(process.pid, signal.SIGKILL)
    assert process.stdout is not None
    out, text = process.stdout.read(), "".join(errors)
    assert process.returncode == 130 and "Traceback" not in text, text[-3000:]
    assert stopped_s < 2.0, stopped_s
    assert not _group_alive(process.pid), "a worker outlived the command"
    document = json.loads(out.strip().splitlines()[-1])
    assert document["partial"] is True and document["finished_rows"] == ["code"]
    row = document["rows"]["code"]
    assert row["strongest_baseline"] == _STRONGEST and row["sustained_jobs_per_s"] > 0
    last = text.strip().splitlines()[-1]
    assert last.startswith("error: interrupted: bench stack-limits stopped with 1 row finished: code")
    assert not list(tmp_path.rglob("*.md"))  # no report page
