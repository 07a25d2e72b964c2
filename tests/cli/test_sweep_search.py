"""``slosched sweep --search`` and ``--model config.json`` from the command line: the JSON shape, the cost
column of ``--mix``, and one error line on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.perf.test_hf_config import LLAMA_3_8B
from tests.planning.test_sweep import SMALL

QUICK = ["--quick", "--seeds", "1", "--jobs", "40", "--workers", "1"]


def _sweep(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "slosched.cli", "sweep", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.fixture()
def scenario_file(tmp_path: Path) -> Path:
    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text(json.dumps(LLAMA_3_8B))
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "prices": {"A6000": 0.5}}))
    return path


def test_search_json_and_table(scenario_file: Path, tmp_path: Path) -> None:
    args = ["--search", "--rate", "1", "--gpus", "A100-80G,A6000", "--tp", "1", "--measure", "1", "--json"]
    model = ["--model", str(tmp_path / "llama"), "--policies", "least-tokens+chunked-fcfs"]
    result = _sweep(str(scenario_file), *QUICK, *args, *model, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Cheapest fleet for 1 jobs/s at 90%" in result.stdout and "answer:" in result.stdout
    search = json.loads(result.stdout.strip().splitlines()[-1])["search"]
    assert search["model"].endswith("llama") and search["policy"] == "least-tokens+chunked-fcfs"
    answer = search["answer"]
    assert answer["status"] == "carries" and answer["capacity_rps"]["median"] > 0
    a6000 = next(row for row in search["candidates"] if row["gpu"] == "A6000")
    assert a6000["price_per_gpu_hour"] == 0.5  # the scenario's prices: block


def test_mix_rows_carry_their_cost(scenario_file: Path, tmp_path: Path) -> None:
    args = ["--mix", "a100:1,a6000:1", "--price", "A100=2", "--policies", "least-tokens+chunked-fcfs", "--json"]
    result = _sweep(str(scenario_file), *QUICK, *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "$/hour" in result.stdout
    (row,) = json.loads(result.stdout.strip().splitlines()[-1])["rows"]
    assert row["cost_per_hour"] == pytest.approx(2.5)
    assert row["capacity_per_dollar"]["0.90"] == pytest.approx(row["capacity_rps"]["0.90"]["median"] / 2.5)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--search"], "--search"),
        (["--search", "--rate", "1", "--size", "a100"], "--search"),
        (["--search", "--rate", "1", "--policies", "round-robin+fcfs,least-tokens+fcfs"], "--policies"),
        (["--search", "--rate", "1", "--tp", "0"], "--tp"),
        (["--search", "--rate", "1", "--gpus", "H300"], "H300"),
        (["--search", "--rate", "1", "--price", "H100"], "--price"),
        (["--model", "nowhere/config.json"], "--model"),
        (["--model", "bad.json"], "num_hidden_layers"),
    ],
)
def test_bad_input_is_one_error_line(scenario_file: Path, tmp_path: Path, args: list[str], field: str) -> None:
    (tmp_path / "bad.json").write_text(json.dumps({**LLAMA_3_8B, "num_hidden_layers": 0}))
    result = _sweep(str(scenario_file), "--quick", *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and field in lines[0], result.stderr


def test_a_scenario_model_may_be_a_config_beside_it(scenario_file: Path, tmp_path: Path) -> None:
    from slosched.scenario.config import load_scenario

    data = yaml.safe_load(scenario_file.read_text())
    data["cluster"]["instances"][0]["model"] = "llama/config.json"
    scenario_file.write_text(yaml.safe_dump(data))
    group = load_scenario(scenario_file).cluster.instances[0]
    assert group.model == str((tmp_path / "llama" / "config.json").resolve())
