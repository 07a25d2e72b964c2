"""GPU profile script: the torch-free parts (grids, memory budget, observations, fit, report) in the main
environment, and one real run of the tiny model on CPU with the vLLM virtualenv's torch."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from slosched.perf import gpu_profile
from slosched.perf.gpu_profile_data import (
    ProfilePoint,
    ProfileResult,
    decode_memory_bytes,
    grid_for,
    kv_blocks_estimate,
    plan_decode,
)
from slosched.perf.gpu_profile_report import fit_points, observations, render_markdown
from slosched.perf.profile_fit import PARAMS, MeasuredProfile, MeasuredStepModel
from slosched.perf.roofline import RooflineModel

LLAMA3_KV_BYTES = 2 * 32 * 8 * 128 * 2  # 128 KiB per token in bf16
TRUTH = MeasuredStepModel(
    fixed_s=0.012, prefill_token_s=6e-5, prefill_pair_s=2e-9, decode_seq_s=1.5e-4, kv_token_s=4e-8
)


def _synthetic_points(noise: float = 0.0) -> list[ProfilePoint]:
    """The full grid timed by TRUTH (optionally with alternating relative noise), plus one skipped point."""
    grid = grid_for(tiny=False, quick=False)
    points = []
    for index, n in enumerate(grid.prefill_tokens):
        t = TRUTH.step_time_s(n, 0, 0, 0) * (1 + noise * (-1) ** index)
        points.append(ProfilePoint("prefill", 1, n, (t, t * 1.02, t * 0.99)))
    for b, c, reason in plan_decode(grid, LLAMA3_KV_BYTES, 32, 50 * 2**30):
        if reason is None:
            t = TRUTH.step_time_s(0, 0, b, b * c)
            points.append(ProfilePoint("decode", b, c, (t, t)))
        else:
            points.append(ProfilePoint("decode", b, c, skipped=reason))
    return points


def _result(points: list[ProfilePoint], gpu: str | None = "H100") -> ProfileResult:
    return ProfileResult(
        device="NVIDIA H100 80GB HBM3",
        torch_version="2.x",
        transformers_version="5.x",
        dtype="bfloat16",
        model={"name": "Llama-3-8B-shaped", "layers": 32},
        warmup=2,
        repeats=7,
        memory_budget_bytes=50 * 2**30,
        points=points,
        roofline_gpu=gpu,
        roofline_model="Llama-3-8B" if gpu else None,
    )


def test_grids_cover_the_requested_sweep() -> None:
    full = grid_for(tiny=False, quick=False)
    assert full.prefill_tokens == (128, 512, 1024, 2048, 4096, 8192)
    assert full.decode_batches == (1, 8, 32, 64, 128, 256) and full.decode_contexts == (512, 2048)
    assert full.max_positions == 8192
    quick, tiny = grid_for(tiny=False, quick=True), grid_for(tiny=True, quick=True)
    assert len(quick.prefill_tokens) < len(full.prefill_tokens) and quick.repeats < full.repeats
    assert max(tiny.prefill_tokens) <= 512 and tiny.max_positions == max(tiny.decode_contexts) + 1


def test_memory_budget_skips_the_points_that_do_not_fit() -> None:
    # 256 x 2048 tokens of Llama-3-8B KV is 64 GiB (+ one layer's fill): over a 53 GiB budget; 128 x 2048 fits.
    assert decode_memory_bytes(256, 2048, LLAMA3_KV_BYTES, 32) == 256 * 2049 * LLAMA3_KV_BYTES + 2**31
    plan = {(b, c): reason for b, c, reason in plan_decode(grid_for(False, False), LLAMA3_KV_BYTES, 32, 53 * 2**30)}
    assert len(plan) == 12 and plan[(128, 2048)] is None and plan[(256, 512)] is None
    reason = plan[(256, 2048)]
    assert reason is not None and "66.0 GiB" in reason and "53.0 GiB" in reason
    with pytest.raises(ConfigError, match="memory_budget_bytes"):
        plan_decode(grid_for(False, False), LLAMA3_KV_BYTES, 32, 0)


def test_kv_capacity_estimate_matches_the_roofline_reckoning() -> None:
    roofline = RooflineModel.build("H100", "Llama-3-8B")
    estimate = kv_blocks_estimate(int(roofline.gpu.memory_bytes), int(roofline.weight_bytes), LLAMA3_KV_BYTES)
    assert abs(estimate - roofline.num_kv_blocks()) <= 1
    assert kv_blocks_estimate(10**9, 2 * 10**9, LLAMA3_KV_BYTES) == 0


def test_point_invariants() -> None:
    assert ProfilePoint("decode", 8, 512, (0.3, 0.1, 0.2)).median_s == 0.2
    with pytest.raises(ConfigError, match="kind"):
        ProfilePoint("verify", 1, 1, (0.1,))
    with pytest.raises(ConfigError, match="times_s"):
        ProfilePoint("prefill", 1, 128)
    with pytest.raises(ConfigError, match="times_s"):
        ProfilePoint("prefill", 1, 128, (0.1,), skipped="no")


def test_observations_use_slosched_step_vocabulary() -> None:
    points = [
        ProfilePoint("prefill", 1, 512, (0.03, 0.01, 0.02)),
        ProfilePoint("decode", 32, 2048, (0.05,)),
        ProfilePoint("decode", 256, 2048, skipped="too big"),
    ]
    rows = [
        (
            o.num_prefill_tokens,
            o.prefill_context_tokens,
            o.num_decode_seqs,
            o.decode_context_tokens,
            tuple(o.durations_s),
        )
        for o in observations(points)
    ]
    assert rows == [(512, 0, 0, 0, (0.02,)), (0, 0, 32, 32 * 2048, (0.05,))]


def test_fit_recovers_the_step_model_and_round_trips(tmp_path: Path) -> None:
    fit = fit_points(_synthetic_points(), {"kind": "gpu_profile"}, num_gpu_blocks=1000, block_size=16)
    truth = (TRUTH.fixed_s, TRUTH.prefill_token_s, TRUTH.prefill_pair_s, TRUTH.decode_seq_s, TRUTH.kv_token_s)
    for name, expected, estimate in zip(PARAMS, truth, fit.estimates, strict=True):
        assert estimate == pytest.approx(expected, rel=1e-3), name
    loaded = MeasuredProfile.load(fit.save(tmp_path / "fit.json"))
    assert loaded.step_model().step_time_s(0, 0, 64, 64 * 512) == pytest.approx(TRUTH.step_time_s(0, 0, 64, 64 * 512))
    assert loaded.step_model().num_kv_blocks() == 1000


def test_fit_names_what_too_few_points_cannot_identify() -> None:
    with pytest.raises(ConfigError, match="observations"):
        fit_points([ProfilePoint("prefill", 1, n, (0.01 * n,)) for n in (1, 2, 3, 4, 5, 6)], {})


def test_report_compares_with_roofline_and_anchors() -> None:
    points = _synthetic_points()
    fit = fit_points(points, {})
    text = render_markdown(_result(points), fit)
    splitwise = RooflineModel.build("H100", "Llama-3-8B", 1, "splitwise")
    vidur = RooflineModel.build("H100", "Llama-3-8B", 1, "vidur")
    prefill = next(p for p in points if p.kind == "prefill" and p.tokens == 4096)
    median = prefill.median_s
    assert median is not None
    row = next(line for line in text.splitlines() if line.startswith("| 4096 |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[4] == f"{splitwise.step_time_s(4096, 0, 0, 0) * 1000:.1f}"
    assert cells[5] == f"{median / splitwise.step_time_s(4096, 0, 0, 0):.2f}"
    assert cells[7] == f"{median / vidur.step_time_s(4096, 0, 0, 0):.2f}"
    assert "| 256 | 2048 | skipped: needs" in text
    assert "Llama-2-7B H100 tp1 t_1tok_ms" in text and "A100 tp1" not in text  # only the H100 anchors
    assert "12 anchor(s) for H100, 0 of them for Llama-3-8B" in text and "| 21 us/token | 20.4 us/token |" in text
    assert "Warning" not in text and "fixed_s" in text


def test_report_without_roofline_or_fit() -> None:
    points = [ProfilePoint("prefill", 1, 32, (0.01,)), ProfilePoint("decode", 1, 64, (0.002,))]
    text = render_markdown(_result(points, gpu=None), None, "observations: need more points")
    assert "No roofline comparison" in text and "No fit: observations: need more points." in text
    assert "Anchor points" not in text
    mismatch = render_markdown(_result(points, gpu="A100"), None)
    assert "Warning: the device (NVIDIA H100 80GB HBM3) is not the roofline's GPU (A100)" in mismatch


def test_render_rebuilds_reports_from_json_without_torch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.json"
    source.write_text(json.dumps(_result(_synthetic_points(noise=0.05)).to_json_dict()))
    assert gpu_profile.main(["--render", str(source), "--out", str(tmp_path / "out")]) == 0
    assert ProfileResult.from_json_dict(json.loads((tmp_path / "out" / "gpu_profile.json").read_text())).points
    assert MeasuredProfile.load(tmp_path / "out" / "gpu_profile_fit.json").num_steps == 17
    assert "## Decode" in (tmp_path / "out" / "gpu_profile.md").read_text()
    assert "gpu_profile.md" in capsys.readouterr().out


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_missing_torch_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gpu_profile.main(["--out", str(tmp_path), "--device", "cpu", "--tiny"]) == 2
    assert "torch is not installed" in capsys.readouterr().err
    assert "torch" not in sys.modules


@pytest.mark.vllm
def test_tiny_profile_runs_on_cpu(tmp_path: Path, vllm_python: Path) -> None:
    command = [str(vllm_python), "-m", "slosched.perf.gpu_profile", "--tiny", "--quick", "--device", "cpu"]
    done = subprocess.run([*command, "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads((tmp_path / "gpu_profile.json").read_text())
    assert "gpu_profile.md" in done.stdout and (tmp_path / "gpu_profile.md").read_text().startswith("# GPU profile")
    result = ProfileResult.from_json_dict(data)
    grid = grid_for(tiny=True, quick=True)
    assert len(result.points) == len(grid.prefill_tokens) + len(grid.decode_batches) * len(grid.decode_contexts)
    for point in result.points:
        assert point.skipped is None and len(point.times_s) == grid.repeats and min(point.times_s) > 0
    profile = MeasuredProfile.load(tmp_path / "gpu_profile_fit.json")
    assert profile.num_steps == len(result.points) and profile.source["kind"] == "gpu_profile"
    # Largest context: 64 sequences read 64x the KV and run 64 rows through every matmul. Fastest runs
    # compared, since the CPU is shared.
    context = max(grid.decode_contexts)
    by_batch = {p.batch: p.min_s for p in result.points if p.kind == "decode" and p.tokens == context}
    smallest, largest = by_batch[min(by_batch)], by_batch[max(by_batch)]
    assert smallest is not None and largest is not None and largest > smallest
