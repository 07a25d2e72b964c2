"""The plugin on vLLM's real v1 Scheduler: randomized decisions over many steps lose no request
(``vllm_harness.py``, run with the vLLM virtualenv's Python), the async variant is chosen when vLLM
schedules asynchronously, and an unsupported vLLM version fails with a clear message."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

HARNESS = Path(__file__).with_name("vllm_harness.py")


@pytest.mark.vllm
def test_randomized_decisions_never_lose_a_request(vllm_python: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [str(vllm_python), str(HARNESS), str(tiny_model_dir), "200", "1", "2", "3:async"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    for run in report["runs"]:
        assert run["num_violations"] == 0, run["violations"]
        assert not run["unfinished"] and not run["wrong_token_counts"], run
        assert run["requests"] > 150 and run["preemptions"] > 0  # the chaos really exercised preemption
        assert run["held_running"] > 0 and run["held_waiting"] > 0
        assert {"decode_only", "prefill_only", "prefill_first"} <= set(run["modes"])
        assert run["metadata_problems"]["slosched_deadline_unix_s"] > 0  # bad field counted, request served
    classes = {run["async"]: run["class"] for run in report["runs"]}
    assert classes == {False: "SloschedScheduler", True: "AsyncSloschedScheduler"}
    assert "supports vLLM 0.32.0, found 0.31.0" in report["version_message"]
