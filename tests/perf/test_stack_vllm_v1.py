"""The current-engine stack ``vllm-v1``: every measured H100 step within the band, properties, the per-sequence
term scaling with the model, the older stacks untouched, the calibrate CLI and the graph-mode profile."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.instance import InstanceSpec
from slosched.perf import calibrate
from slosched.perf.gpu_profile_data import ProfilePoint, ProfileResult
from slosched.perf.hardware import model_facts
from slosched.perf.measured_steps import bundled_measured_steps, heldout_measured_steps, load_measured
from slosched.perf.roofline import CALIBRATION, DEFAULT_STACK, RooflineModel
from slosched.perf.stack_fit import BAND, check_steps, fit_stack, group_summary
from slosched.perf.stacks import CURRENT_ENGINE_STACK

STEPS = bundled_measured_steps()
CHECKS = check_steps(STEPS)


@pytest.mark.parametrize("check", CHECKS, ids=[f"{c.step.group}: {c.step.label}" for c in CHECKS])
def test_every_measured_h100_step_within_the_band(check: object) -> None:
    assert check.in_band, check


def test_the_52_points_by_group() -> None:
    assert Counter(s.group for s in STEPS) == {"decode": 17, "prefill": 7, "mixed": 18, "long": 10}
    summary = group_summary(CHECKS)
    assert all(BAND[0] <= low <= high <= BAND[1] for low, high in summary.values())


def test_shipped_constants_are_the_fitted_ones() -> None:
    fit = fit_stack(STEPS)
    shipped = CALIBRATION.stacks[CURRENT_ENGINE_STACK]
    assert fit.stack.compute_scale["H100"] == pytest.approx(shipped.compute_scale["H100"], rel=0.01)
    assert fit.stack.memory_scale["H100"] == pytest.approx(shipped.memory_scale["H100"], rel=0.01)
    assert fit.params["layer_overhead_s"] == pytest.approx(shipped.layer_overhead_s, rel=0.01)
    assert fit.params["attention_scale"] == pytest.approx(shipped.attention_scale, rel=0.01)
    assert fit.params["seq_work_scale"] == pytest.approx(shipped.seq_work_scale, rel=0.01)
    assert fit.params["attention_units"] == pytest.approx(shipped.attention_units, rel=0.01)
    assert fit.params["mixed_layer_overhead_s"] == pytest.approx(shipped.mixed_layer_overhead_s, rel=0.01)


HELD_OUT = heldout_measured_steps()


def test_held_out_models_span_sizes_below_and_above_the_fitted_one() -> None:
    """The fit saw only Llama-3-8B; the held-out files hold smaller and larger models measured the same way."""
    sizes = {steps[0].model: model_facts(steps[0].model).params_b for steps in HELD_OUT.values()}
    assert min(sizes.values()) < 2 and max(sizes.values()) > 30 and len(sizes) >= 6
    assert all(len(steps) >= 20 for steps in HELD_OUT.values())


@pytest.mark.parametrize("name", sorted(HELD_OUT))
def test_every_held_out_step_within_the_band(name: str) -> None:
    rows = check_steps(HELD_OUT[name])
    assert {r.step.group for r in rows} >= {"decode", "prefill", "mixed", "long"}
    assert [r.step.label for r in rows if not r.in_band] == []


def test_the_current_engine_is_the_default_everywhere() -> None:
    """An instance, a scenario and the roofline that name no stack all run on the current engine."""
    assert DEFAULT_STACK == CURRENT_ENGINE_STACK == "vllm-v1" and CURRENT_ENGINE_STACK in CALIBRATION.stacks
    assert InstanceSpec(name="i", gpu="H100", model="Llama-3-8B").stack == DEFAULT_STACK
    assert RooflineModel.build("H100", "Llama-3-8B").stack.name == DEFAULT_STACK


def test_older_stacks_take_none_of_the_new_terms() -> None:
    new = {"memory_scale", "layer_overhead_s", "seq_work_scale", "attention_scale", "attention_units"}
    assert new <= {f.name for f in fields(CALIBRATION.stacks["vidur"])}
    for name in ("splitwise", "vidur", "hexgen"):
        stack = CALIBRATION.stacks[name]
        assert not stack.memory_scale and stack.layer_overhead_s == 0.0 and stack.seq_work_scale == 0.0
        assert stack.attention_scale == 1.0 and stack.attention_units == 0.0 and stack.mixed_layer_overhead_s == 0.0


def _seq_term_s(model: str, tp: int = 1) -> float:
    roofline = RooflineModel.build("H100", model, tp, CURRENT_ENGINE_STACK)
    return roofline.breakdown(0, 0, 2, 0).overhead_s - roofline.breakdown(0, 0, 1, 0).overhead_s


def test_per_sequence_term_scales_with_the_model() -> None:
    small, mid, large = (_seq_term_s(m) for m in ("Qwen2.5-Coder-1.5B", "Llama-3-8B", "Llama-3.1-70B"))
    assert 0.0 < small < mid < large
    assert large / mid == pytest.approx(70.6 / 8.03, rel=0.15)  # in proportion to the row's FLOPs
    assert _seq_term_s("Llama-3.1-70B", 4) < large  # each GPU runs a quarter of the row


def test_fixed_cost_scales_with_layers() -> None:
    def fixed(model: str) -> float:
        return RooflineModel.build("H100", model, 1, CURRENT_ENGINE_STACK).breakdown(0, 0, 1, 0).overhead_s

    assert fixed("Qwen2.5-Coder-1.5B") < fixed("Llama-3-8B") < fixed("Llama-3.1-70B")


counts = st.integers(min_value=0, max_value=4096)
models = st.sampled_from([("Qwen2.5-Coder-1.5B", 1), ("Llama-3-8B", 1), ("Llama-3.1-70B", 4)])


@settings(max_examples=150, deadline=None)
@given(models, counts, counts, st.integers(0, 512), st.integers(0, 32768), st.integers(1, 512))
def test_step_time_grows_with_tokens_sequences_and_context(
    spec: tuple[str, int], prefill: int, prefill_ctx: int, seqs: int, ctx: int, more: int
) -> None:
    roofline = RooflineModel.build("H100", spec[0], spec[1], CURRENT_ENGINE_STACK)
    base = roofline.step_time_s(prefill, prefill_ctx, seqs, seqs * ctx)
    assert roofline.step_time_s(prefill + more, prefill_ctx, seqs, seqs * ctx) > base
    assert roofline.step_time_s(prefill, prefill_ctx, seqs + more, (seqs + more) * ctx) > base
    assert roofline.step_time_s(prefill, prefill_ctx, seqs, seqs * ctx + more) >= base
    if prefill:
        assert roofline.step_time_s(prefill, prefill_ctx + more, seqs, seqs * ctx) > base


def test_decode_run_matches_steps_bit_for_bit() -> None:
    roofline = RooflineModel.build("H100", "Llama-3-8B", 1, CURRENT_ENGINE_STACK)
    run = roofline.decode_run_s(24, 24 * 700, 9)
    assert [float(t) for t in run] == [roofline.step_time_s(0, 0, 24, 24 * 700 + k * 24) for k in range(9)]


def test_calibrate_cli_passes_on_the_bundled_points(capsys: pytest.CaptureFixture[str]) -> None:
    assert calibrate.main(["--no-anchors"]) == 0
    out = capsys.readouterr().out
    assert "52/52 measured steps within the band" in out and "/splitwise" in out
    total = sum(len(steps) for steps in HELD_OUT.values())
    assert f"{total}/{total} held-out steps within the band" in out and "Qwen2.5-Coder-1.5B" in out


def _profile_file(tmp_path: Path, scale: float) -> Path:
    points = [
        ProfilePoint("prefill", 1, 2048, (0.0639 * scale,)),
        ProfilePoint("decode", 64, 512, (0.01053 * scale,)),
        ProfilePoint("mixed", 64, 512, (0.02475 * scale,), None, 0, 1024),
    ]
    result = ProfileResult(
        "H100", "2.x", "none", "bfloat16", {"name": "x"}, 1, 3, 1 << 30, points, "H100", "Llama-3-8B"
    )
    path = tmp_path / f"profile-{scale}.json"
    path.write_text(json.dumps(result.to_json_dict()))
    return path


def test_calibrate_reads_a_profile_and_fails_outside_the_band(tmp_path: Path) -> None:
    good = _profile_file(tmp_path, 1.0)
    steps = load_measured(good)
    assert [s.group for s in steps] == ["prefill", "decode", "mixed"]
    assert steps[2].step_args() == (512, 0, 64, 64 * 1024)
    assert calibrate.main(["--no-anchors", "--measured", str(good)]) == 0
    assert calibrate.main(["--no-anchors", "--measured", str(_profile_file(tmp_path, 2.0))]) == 1
    assert calibrate.main(["--no-anchors", "--refit", "--measured", str(good)]) == 0


@pytest.mark.vllm
def test_graph_profile_runs_on_cpu(tmp_path: Path, vllm_python: Path) -> None:
    """The CUDA-graph mode's forward, eagerly on CPU in its tiny form (torch from the vLLM virtualenv)."""
    command = [str(vllm_python), "-m", "slosched.perf.gpu_profile", "--tiny", "--quick", "--device", "cpu"]
    done = subprocess.run([*command, "--engine", "graph", "--out", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    result = ProfileResult.from_json_dict(json.loads((tmp_path / "gpu_profile.json").read_text()))
    kinds = Counter(p.kind for p in result.points)
    # Two mixed steps and one long-context chunk (a mixed shape); a long-context decode beside the grid's.
    assert kinds["mixed"] == 3 and kinds["prefill"] == 3 and all(p.skipped is None for p in result.points)
    assert any(p.kind == "decode" and p.tokens == 256 and p.batch == 2 for p in result.points)
    assert any(p.kind == "mixed" and p.prefill_context == 128 for p in result.points)
    assert "## Mixed" in (tmp_path / "gpu_profile.md").read_text()


def test_calibrate_names_a_bad_measured_file_in_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "other.json").write_text('{"x": 1}')
    for path in (tmp_path / "missing.json", tmp_path / "other.json"):
        assert calibrate.main(["--no-anchors", "--measured", str(path)]) == 2
        assert capsys.readouterr().err.startswith("error: --measured: ")
