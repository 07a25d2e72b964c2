from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.perf.calibrate import AnchorCheck, anchor_checks, fit_efficiencies
from slosched.perf.hardware import gpu_names
from slosched.perf.roofline import CALIBRATION, RooflineModel

CHECKS = anchor_checks()


@pytest.mark.parametrize("check", CHECKS, ids=[f"{c.source}: {c.label}" for c in CHECKS])
def test_every_anchor_within_ten_percent(check: AnchorCheck) -> None:
    assert abs(check.error_pct) <= 10.0, check


def test_anchor_set_is_complete() -> None:
    sources = {c.source for c in CHECKS}
    assert sources == {"vidur", "splitwise", "hexgen"}
    assert len(CHECKS) == 37


def test_shipped_constants_are_the_fitted_ones() -> None:
    fitted = {c.label: c.error_pct for c in anchor_checks(fit_efficiencies().calibration)}
    for check in CHECKS:
        assert check.error_pct == pytest.approx(fitted[check.label], abs=0.3)


@pytest.fixture(scope="module")
def llama8b() -> RooflineModel:
    return RooflineModel.build("A100", "Llama-3-8B")


counts = st.integers(min_value=0, max_value=4096)


@settings(max_examples=200, deadline=None)
@given(p=counts, pc=counts, d=st.integers(0, 256), dc=st.integers(0, 1 << 18), which=st.integers(0, 3))
def test_monotonic_in_every_argument(p: int, pc: int, d: int, dc: int, which: int) -> None:
    model = RooflineModel.build("H100", "Llama-3.1-70B", tp=4)
    args = [p, pc, d, dc]
    bigger = list(args)
    bigger[which] += 1 + args[which] // 3
    assert model.step_time_s(*bigger) >= model.step_time_s(*args)


def test_grows_with_tokens_and_batch(llama8b: RooflineModel) -> None:
    prefill = [llama8b.step_time_s(n, 0, 0, 0) for n in (1, 64, 512, 2048, 8192)]
    decode = [llama8b.step_time_s(0, 0, b, b * 1000) for b in (1, 8, 64, 256)]
    assert prefill == sorted(prefill) and len(set(prefill)) == len(prefill)
    assert decode == sorted(decode) and len(set(decode)) == len(decode)
    # Decode is memory-bound: batch 8 costs far less than 8 batch-1 steps.
    assert decode[1] < 2 * decode[0]


def test_empty_step_takes_no_time(llama8b: RooflineModel) -> None:
    assert llama8b.step_time_s(0, 0, 0, 0) == 0.0


@pytest.mark.parametrize("gpu", ["A100", "H100"])
def test_tensor_parallelism_speeds_up_big_models(gpu: str) -> None:
    by_tp = {tp: RooflineModel.build(gpu, "Llama-2-70B", tp=tp) for tp in (2, 4, 8)}
    for shape in [(2048, 0, 0, 0), (0, 0, 1, 1024), (0, 0, 64, 64 * 2048), (512, 0, 32, 32 * 1000)]:
        times = [by_tp[tp].step_time_s(*shape) for tp in (2, 4, 8)]
        assert times[0] > times[1] > times[2], shape


@pytest.mark.parametrize("gpu", gpu_names())
@pytest.mark.parametrize(("batch", "context", "steps"), [(1, 0, 1), (1, 512, 300), (64, 64 * 1500, 1000), (7, 3, 2)])
def test_decode_run_matches_stepping(gpu: str, batch: int, context: int, steps: int) -> None:
    model = RooflineModel.build(gpu, "Llama-3-8B")
    run = model.decode_run_s(batch, context, steps)
    stepped = np.array([model.step_time_s(0, 0, batch, context + k * batch) for k in range(steps)])
    assert run.dtype == np.float64 and run.shape == (steps,)
    np.testing.assert_allclose(run, stepped, rtol=1e-12, atol=0.0)
    assert np.array_equal(run, stepped)  # in fact bit-identical


def test_decode_run_edge_cases(llama8b: RooflineModel) -> None:
    assert llama8b.decode_run_s(4, 100, 0).shape == (0,)
    assert np.all(llama8b.decode_run_s(0, 0, 3) == 0.0)


def test_deterministic() -> None:
    first = RooflineModel.build("L40S", "Qwen2.5-32B", tp=2)
    second = RooflineModel.build("L40S", "Qwen2.5-32B", tp=2)
    shape = (777, 1234, 33, 33 * 901)
    assert first.step_time_s(*shape) == second.step_time_s(*shape) == first.step_time_s(*shape)
    assert np.array_equal(first.decode_run_s(5, 10, 50), second.decode_run_s(5, 10, 50))


def test_breakdown_and_linear_component_are_pieces_of_the_step(llama8b: RooflineModel) -> None:
    for shape in [(2048, 512, 0, 0), (0, 0, 16, 16 * 700), (300, 0, 40, 40 * 2000)]:
        assert llama8b.breakdown(*shape).total_s == pytest.approx(llama8b.step_time_s(*shape), rel=1e-12)
    for tokens in (1, 512, 4096):
        assert llama8b.linear_time_s(tokens) < llama8b.step_time_s(tokens, 0, 0, 0)


def test_kv_blocks(llama8b: RooflineModel) -> None:
    blocks = llama8b.num_kv_blocks(0.9, 16)
    # 72 GB usable - 16 GB weights (8.0 B params) - 2 GB reserve, 128 KiB of bf16 KV per token.
    assert blocks == (72e9 - 16e9 - 2e9) // (16 * 131072)
    assert llama8b.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2
    assert llama8b.num_kv_blocks(0.5, 32) < blocks
    assert RooflineModel.build("A100-40G", "Llama-3.1-70B").num_kv_blocks() == 0
    assert RooflineModel.build("A6000", "Llama-2-70B").num_kv_blocks() == 0
    assert RooflineModel.build("A100", "Llama-2-70B", tp=4).num_kv_blocks() > 0
    with pytest.raises(ConfigError):
        llama8b.num_kv_blocks(1.5)


def test_no_contention_latency(llama8b: RooflineModel) -> None:
    prompt, output = 1000, 200
    expected = llama8b.step_time_s(prompt, 0, 0, 0) + llama8b.decode_run_s(1, prompt, output - 1).sum()
    assert llama8b.no_contention_latency_s(prompt, output) == pytest.approx(expected, rel=1e-12)
    assert llama8b.no_contention_latency_s(prompt, 1) == llama8b.step_time_s(prompt, 0, 0, 0)
    assert llama8b.no_contention_latency_s(prompt, output, cached_tokens=800) < expected
    assert llama8b.no_contention_latency_s(prompt, output, cached_tokens=prompt) > 0.0


def test_bad_inputs() -> None:
    with pytest.raises(UnknownNameError):
        RooflineModel.build("A100", "Llama-3-8B", stack="tgi")
    with pytest.raises(ConfigError):
        RooflineModel.build("A100", "Llama-3-8B", tp=3)
    with pytest.raises(UnknownNameError):
        RooflineModel.build("TPUv5", "Llama-3-8B")


def test_every_bundled_gpu_is_calibrated_or_borrows_a_calibrated_one() -> None:
    from slosched.perf.hardware import gpu_facts

    for name in gpu_names():
        facts = gpu_facts(name)
        assert name in CALIBRATION.gpus or facts.efficiency_like in CALIBRATION.gpus, name
    assert {"A100-80G", "H100", "A40", "L40S"} <= set(CALIBRATION.gpus)


def test_decode_step_terms_reproduce_step_time_bit_for_bit() -> None:
    from slosched.perf.roofline import RooflineModel

    model = RooflineModel.build("A6000", "Llama-3-8B")
    for batch, context in ((1, 100), (7, 12345), (33, 99999)):
        base, per_token = model.decode_step_terms(batch)
        run = model.decode_run_s(batch, context, 20)
        for step in range(20):
            expected = model.step_time_s(0, 0, batch, context + step * batch)
            assert base + (context + batch + step * batch) * per_token == expected == run[step]
