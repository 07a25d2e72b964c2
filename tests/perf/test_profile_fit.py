"""Fitting a measured step model: recovers known parameters from synthetic timings, CIs cover the truth."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.perf.profile_fit import PARAMS, MeasuredProfile, MeasuredStepModel, fit_profile
from slosched.tuning.engine_profile import RequestTrace, SweepDesign, wave_observations

TRUE = MeasuredStepModel(fixed_s=0.006, prefill_token_s=6e-5, prefill_pair_s=2e-9, decode_seq_s=1.5e-4, kv_token_s=4e-8)


def synthetic_wave(
    model: MeasuredStepModel, prompt: int, k: int, out: int, rng: np.random.Generator, sigma: float
) -> list[RequestTrace]:
    """Token times of a wave of k simultaneous requests served by ``model`` (multiplicative noise)."""
    noise = lambda: 1.0 + sigma * rng.standard_normal()  # noqa: E731
    now = model.step_time_s(k * prompt, 0, 0, 0) * noise()
    times = [now]
    durations = model.decode_run_s(k, k * prompt, out - 1)
    for duration in durations:
        now += duration * noise()
        times.append(now)
    # Streams of one wave see the same steps; a small per-stream jitter stands in for delivery delays.
    return [RequestTrace(0.0, tuple(t + 1e-6 * rng.random() for t in times)) for _ in range(k)]


def synthetic_observations(seed: int, sigma: float = 0.02):  # type: ignore[no-untyped-def]
    """Noise-free waves through the real wave -> observation code, then ``sigma`` multiplicative noise on
    every observation (the fit's noise model: one relative error per row)."""
    rng = np.random.default_rng(seed)
    design = SweepDesign(prompt_lengths=(64, 256, 512, 1024, 2048), concurrencies=(1, 3, 8), output_lengths=(24,))
    observations = []
    for prompt, k, out in design.points():
        for obs in wave_observations(prompt, synthetic_wave(TRUE, prompt, k, out, rng, 0.0), 8192):
            noisy = tuple(d * (1 + sigma * rng.standard_normal()) for d in obs.durations_s)
            observations.append(replace(obs, durations_s=noisy))
    return observations


def true_values() -> list[float]:
    return [TRUE.fixed_s, TRUE.prefill_token_s, TRUE.prefill_pair_s, TRUE.decode_seq_s, TRUE.kv_token_s]


def test_noise_free_timings_recover_the_parameters_exactly() -> None:
    profile = fit_profile(synthetic_observations(0, sigma=0.0))
    np.testing.assert_allclose(profile.estimates, true_values(), rtol=5e-3)  # streams carry 1 us of jitter
    assert profile.clamped == ()


def test_noisy_fit_is_close_and_confidence_intervals_cover_the_truth() -> None:
    covered = 0
    trials = 40
    for seed in range(trials):
        profile = fit_profile(synthetic_observations(seed))
        lo, hi = np.array(profile.ci_low), np.array(profile.ci_high)
        covered += int(np.sum((lo <= true_values()) & (np.array(true_values()) <= hi)))
        assert 0.01 < profile.residual_rel_std < 0.04  # the injected 2% noise
    rate = covered / (trials * len(PARAMS))
    assert 0.88 <= rate <= 1.0, rate  # nominal 95%
    one = fit_profile(synthetic_observations(1))
    for name in ("fixed_s", "prefill_token_s", "decode_seq_s"):
        estimate, _, _ = one.param(name)
        assert estimate == pytest.approx(getattr(TRUE, name), rel=0.15)


def test_fitted_model_predicts_step_times_and_is_affine_in_decode_context() -> None:
    model = fit_profile(synthetic_observations(3)).step_model()
    for shape in [(1000, 0, 0, 0), (0, 0, 8, 8000), (256, 100, 4, 2000)]:
        assert model.step_time_s(*shape) == pytest.approx(TRUE.step_time_s(*shape), rel=0.05)
    base, per_token = model.decode_step_terms(6)
    assert model.step_time_s(0, 0, 6, 1234) == base + (1234 + 6) * per_token
    run = model.decode_run_s(6, 1234, 5)
    assert run[0] == model.step_time_s(0, 0, 6, 1234)
    assert float(run.sum()) == pytest.approx(model.decode_run_total_s(6, 1234, 5))
    assert model.no_contention_latency_s(100, 1) == model.step_time_s(100, 0, 0, 0)


def test_json_round_trip(tmp_path: Path) -> None:
    profile = fit_profile(synthetic_observations(2), num_gpu_blocks=1000, block_size=16, source={"model": "m"})
    loaded = MeasuredProfile.load(profile.save(tmp_path / "p.json"))
    assert loaded == profile
    assert loaded.step_model().num_kv_blocks(0.9, 32) == 500


def test_bad_inputs_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="observations"):
        fit_profile(synthetic_observations(0)[:1])
    decode_only = [obs for obs in synthetic_observations(0) if obs.num_prefill_tokens == 0]
    with pytest.raises(ConfigError, match=r"cannot identify .*prefill_token_s"):
        fit_profile(decode_only)
    (tmp_path / "bad.json").write_text('{"format": "other"}')
    with pytest.raises(ConfigError, match="not a slosched profile"):
        MeasuredProfile.load(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="num_gpu_blocks"):
        MeasuredStepModel(1.0, 0.0, 0.0, 0.0, 0.0).num_kv_blocks()


def test_profile_round_trips_through_a_scenario(tmp_path: Path) -> None:
    """A scenario naming a profile simulates with the measured truth (job baselines come from it)."""
    from slosched.experiment import compare_policies
    from slosched.scenario.config import parse_scenario

    slow = MeasuredStepModel(0.05, 1e-4, 0.0, 1e-3, 1e-7)  # far slower than an A100 roofline
    estimates = (slow.fixed_s, slow.prefill_token_s, slow.prefill_pair_s, slow.decode_seq_s, slow.kv_token_s)
    path = MeasuredProfile(estimates, estimates, estimates, 100, 0.01, num_gpu_blocks=4000, block_size=16).save(
        tmp_path / "engine.json"
    )
    group = {"name": "a", "gpu": "A100-80G", "model": "Llama-3-8B", "count": 2}
    data = {
        "name": "t",
        "seed": 3,
        "cluster": {"instances": [group]},
        "workload": {"generator": "azure-conv", "arrival": {"process": "poisson", "rate": 1.0}, "num_jobs": 10},
        "slo": {"scale": 5},
        "policies": ["round-robin+fcfs"],
        "simulator": {"noise_sigma": 0.0},
    }
    roofline = parse_scenario(data)
    measured = parse_scenario({**data, "cluster": {"instances": [{**group, "profile": str(path)}]}})
    assert all(spec.profile == str(path) for spec in measured.cluster.specs())
    base = next(iter(compare_policies(roofline).values()))
    run = next(iter(compare_policies(measured).values()))
    assert len(run.jobs) == 10
    for job, ref in zip(run.jobs, base.jobs, strict=True):
        assert job.no_contention_s > 2 * ref.no_contention_s  # the measured model is the truth
    by_job = {record.job_id: record for record in run.requests}
    single = [job for job in run.jobs if job.num_requests == 1]
    assert single
    for job in single:
        request = by_job[job.id]
        expected = slow.no_contention_latency_s(request.prompt_tokens, request.output_tokens)
        assert job.no_contention_s == pytest.approx(expected)
    with pytest.raises(ConfigError, match="file not found"):
        parse_scenario({**data, "cluster": {"instances": [{**group, "profile": str(tmp_path / "none.json")}]}})


def test_outliers_do_not_pull_the_robust_fit() -> None:
    observations = synthetic_observations(5, sigma=0.01)
    # A live engine's worst rows: a stream read late (10x) and a burst read at once (near zero).
    observations[3] = replace(observations[3], durations_s=(observations[3].durations_s[0] * 10,))
    observations[6] = replace(observations[6], durations_s=(1e-7,))
    profile = fit_profile(observations)
    for name in ("fixed_s", "prefill_token_s", "decode_seq_s"):
        assert profile.param(name)[0] == pytest.approx(getattr(TRUE, name), rel=0.1)


def test_packed_chunks_count_their_tokens() -> None:
    # Steps of 10 ms; the server packed tokens 3-5 into one chunk: counts say so, the rate stays right.
    trace = RequestTrace(0.0, (0.05, 0.06, 0.09, 0.10, 0.11), (1, 2, 5, 6, 7))
    (prefill, decode) = wave_observations(100, [trace], 8192)
    assert prefill.durations_s == pytest.approx((0.05,))
    assert decode.num_decode_seqs == 1 and decode.durations_s == pytest.approx((0.01,))


def test_a_relative_profile_path_is_relative_to_the_scenario_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    from slosched.scenario.config import load_scenario

    folder = tmp_path / "scenarios"
    folder.mkdir()
    fit_profile(synthetic_observations(2), num_gpu_blocks=1000, block_size=16).save(folder / "engine.json")
    group = {"name": "a", "gpu": "A100-80G", "model": "Llama-3-8B", "profile": "engine.json"}
    data = {"cluster": {"instances": [group]}, "workload": {"generator": "azure-conv", "num_jobs": 5}}
    (folder / "s.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)  # not the scenario's folder
    (spec,) = load_scenario("scenarios/s.yaml").cluster.specs()
    assert spec.profile is not None and Path(spec.profile).resolve() == (folder / "engine.json").resolve()


def test_a_constant_request_latency_in_ttft_rows_is_separated_from_the_steps() -> None:
    latency = 0.012
    observations = [
        replace(obs, durations_s=(obs.durations_s[0] + latency,)) if obs.num_decode_seqs == 0 else obs
        for obs in synthetic_observations(0, sigma=0.0)
    ]
    profile = fit_profile(observations, prefill_rows_are_ttfts=True)
    assert profile.request_latency_s == pytest.approx(latency, rel=0.01)
    np.testing.assert_allclose(profile.estimates, true_values(), rtol=0.01)
    model = profile.step_model()
    assert model.no_contention_latency_s(100, 1) == pytest.approx(latency + TRUE.step_time_s(100, 0, 0, 0), rel=0.01)
    # Without the flag no step model explains both the TTFT rows and the decode rows.
    assert fit_profile(observations).residual_rel_std > 10 * profile.residual_rel_std


def test_an_attention_cost_indistinguishable_from_zero_is_dropped() -> None:
    """No attention cost in the truth: the fit holds the pair coefficient at 0, with an interval around 0."""
    flat = MeasuredStepModel(0.006, 6e-5, 0.0, 1.5e-4, 4e-8)
    rng = np.random.default_rng(8)
    design = SweepDesign(prompt_lengths=(64, 256, 512, 1024, 2048), concurrencies=(1, 3, 8), output_lengths=(24,))
    observations = []
    for prompt, k, out in design.points():
        for obs in wave_observations(prompt, synthetic_wave(flat, prompt, k, out, rng, 0.0), 8192):
            observations.append(replace(obs, durations_s=(obs.durations_s[0] * (1 + 0.03 * rng.standard_normal()),)))
    profile = fit_profile(observations)
    estimate, low, high = profile.param("prefill_pair_s")
    assert estimate == 0.0 and low <= 0.0 <= high
    assert profile.param("prefill_token_s")[0] == pytest.approx(6e-5, rel=0.1)
