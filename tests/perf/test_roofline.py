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


@settings(max_examples=300, deadline=None)
@given(
    p=counts,
    pc=counts,
    d=st.integers(0, 256),
    dc=st.integers(0, 1 << 18),
    which=st.integers(0, 3),
    stack=st.sampled_from(sorted(CALIBRATION.stacks)),
    model_tp=st.sampled_from([("Llama-3.1-70B", 4), ("Qwen2.5-Coder-1.5B", 1), ("Llama-3-8B", 1)]),
)
def test_monotonic_in_every_argument(
    p: int, pc: int, d: int, dc: int, which: int, stack: str, model_tp: tuple[str, int]
) -> None:
    model = RooflineModel.build("H100", model_tp[0], tp=model_tp[1], stack=stack)
    args = [p, pc, d, dc]
    bigger = list(args)
    bigger[which] += 1 + args[which] // 3
    if which == 2 and d > 0:
        # More sequences arrive at the batch's mean context: the summed context grows with them (with the
        # same total spread over more sequences, an occupancy-limited attention rightly gets faster).
        bigger[3] = dc * bigger[2] // d
    assert model.step_time_s(*bigger) >= model.step_time_s(*args)


def test_few_sequences_at_long_context_are_occupancy_bound() -> None:
    """vllm-v1 (measured H100): 8 sequences x 2 KV heads of Qwen2.5-Coder-1.5B at 32k tokens leave the attention
    kernel short of work units, so the KV streams slower than at 32 sequences x 8k (same tokens)."""
    model = RooflineModel.build("H100", "Qwen2.5-Coder-1.5B", stack="vllm-v1")
    few, many = model.step_time_s(0, 0, 8, 8 * 32768), model.step_time_s(0, 0, 32, 32 * 8192)
    assert few > 1.5 * many
    base, per_token = model.decode_step_terms(8)
    assert model.step_time_s(0, 0, 8, 8 * 32768) == base + (8 * 32768 + 8) * per_token
    splitwise = RooflineModel.build("H100", "Qwen2.5-Coder-1.5B", stack="splitwise")
    assert splitwise.decode_step_terms(8)[1] == splitwise.decode_step_terms(64)[1]  # older stacks: no limit


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


def test_no_contention_latency_is_the_prefill_step_plus_the_decode_run_bit_for_bit() -> None:
    """The prefill step of a prompt alone is cached by prompt length: asked twice, the same floats."""
    model = RooflineModel.build("A6000", "Llama-3-8B")
    for prompt, output in ((1, 1), (300, 2), (4000, 700), (300, 90)):
        expected = model.step_time_s(prompt, 0, 0, 0)
        if output > 1:
            expected += model.decode_run_total_s(1, prompt, output - 1)
        assert model.no_contention_latency_s(prompt, output) == expected
        assert model.no_contention_latency_s(prompt, output) == expected
    assert model.no_contention_latency_s(300, 90, cached_tokens=256) == model.step_time_s(
        44, 256, 0, 0
    ) + model.decode_run_total_s(1, 300, 89)
