"""The plugin on vLLM's real v1 Scheduler: randomized decisions over many steps lose no request
(``vllm_harness.py``, run once with the vLLM virtualenv's Python), the async variant is chosen when vLLM
schedules asynchronously, an unsupported vLLM version fails with a clear message, and ``SaberScheduler``
runs with no speed model configured (calibrated from its own steps)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

HARNESS = Path(__file__).with_name("vllm_harness.py")
PRIOR_LAM = 86.9  # f(1) of the step model's generic prior (an A100 8B model), tokens/s


@pytest.fixture(scope="module")
def report(vllm_python: Path, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    result = subprocess.run(
        [str(vllm_python), str(HARNESS), str(tiny_model_dir), "200", "1", "2", "3:async", "saber"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path_factory.mktemp("harness"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


@pytest.mark.vllm
def test_randomized_decisions_never_lose_a_request(report: dict[str, Any]) -> None:
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


@pytest.mark.vllm
def test_saber_scheduler_without_a_speed_model_calibrates_itself(report: dict[str, Any]) -> None:
    saber = report["saber"]
    assert (saber["class"], saber["policy"]) == ("SaberScheduler", "saber")
    assert saber["requests"] == 40 and not saber["unfinished"] and not saber["wrong_token_counts"], saber
    prior, calibrated = saber["prior"], saber["calibrated"]
    assert prior["num_refreshes"] == 0 and abs(prior["lam"] - PRIOR_LAM) < 1  # start-up: the prior, no error
    # The fake model's steps take 1 ms + 0.5 ms per request: f(1) <= ~670 tokens/s, and it falls with L.
    # Loose bounds: a loaded machine stretches the sleeps, so only a 4x slower step would fail this.
    assert calibrated["num_refreshes"] >= 3 and 150 < calibrated["lam"] < 1000 and calibrated["sigma"] > 0.05
    assert calibrated["context_tokens"] != prior["context_tokens"]  # measured from the running requests
