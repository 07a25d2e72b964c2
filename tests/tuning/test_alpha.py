"""Alpha tuner: finds the best alpha by replay, same answer on every executor; t-test retune trigger."""

from __future__ import annotations

import importlib.util
from dataclasses import replace

import numpy as np
import pytest

from slosched.core.job import JobSpec
from slosched.tuning.alpha import AlphaTuner, TuneConfig, TuneResult, rebase
from slosched.tuning.executors import ProcessExecutor, SerialExecutor, make_executor
from slosched.tuning.window import AlphaController, Window, WindowRecorder, latency_increase_p_value
from tests.conftest import make_instance, make_jobs

# The slow GPU first, so alpha = 0 (pure balance, ties to the lowest index) sends work to the A40; the
# known best alpha is the brute-force optimum over the whole 0.1 grid.
INSTANCES = (make_instance("a40", "A40"), make_instance("a100", "A100-80G"))
CONFIG = TuneConfig(INSTANCES, engine="fcfs", job_policy="deadline")


def _window() -> list[JobSpec]:
    return make_jobs(num_jobs=12, rate=0.2, seed=3, mean_in=1500, mean_out=150)


def test_tuner_finds_the_known_best_alpha() -> None:
    tuner = AlphaTuner(CONFIG, SerialExecutor())
    result = tuner.retune(_window())
    full = tuner.evaluate(_window(), [round(0.1 * i, 1) for i in range(11)])
    best = min(full, key=lambda alpha: (full[alpha], alpha))
    assert result.alpha == best == 1.0
    assert result.mean_latency_s[result.alpha] == pytest.approx(full[best])
    assert full[0.0] > 1.5 * full[best]  # alpha = 0 really is worse here
    assert sorted(result.mean_latency_s) == [0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 1.0]  # coarse + 0.1 below the best


def test_local_processes_give_the_serial_answer() -> None:
    window = _window()[:6]
    alphas = [0.0, 0.5, 1.0]
    serial = AlphaTuner(CONFIG, SerialExecutor()).evaluate(window, alphas)
    pool = ProcessExecutor(max_workers=2)
    try:
        assert AlphaTuner(CONFIG, pool).evaluate(window, alphas) == serial
    finally:
        pool.close()


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray not installed (pip install 'slosched[ray]')")
def test_ray_executor_gives_the_serial_answer() -> None:
    import ray

    window = _window()[:4]
    serial = AlphaTuner(CONFIG, SerialExecutor()).evaluate(window, [0.0, 1.0])
    try:
        executor = make_executor("ray", max_workers=1)  # starts a local Ray instance
        assert AlphaTuner(CONFIG, executor).evaluate(window, [0.0, 1.0]) == serial
    finally:
        ray.shutdown()


def test_rebase_starts_the_window_at_zero() -> None:
    jobs = [replace(job, arrival_s=job.arrival_s + 500.0) for job in _window()]
    assert rebase(jobs)[0].arrival_s == 0.0


class _FakeTuner:
    def __init__(self) -> None:
        self.calls = 0

    def retune(self, jobs: list[JobSpec]) -> TuneResult:
        self.calls += 1
        return TuneResult(0.3, {0.3: 1.0}, 0.0)


def _window_of(latencies: np.ndarray) -> Window:
    return Window(0.0, _window()[: len(latencies)], latencies.tolist())


def test_t_test_fires_on_a_shifted_window_and_not_on_a_stationary_one() -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(60.0, 8.0, 40)
    same = rng.normal(60.0, 8.0, 40)
    worse = rng.normal(75.0, 8.0, 40)
    assert latency_increase_p_value(worse, base) < 0.01
    assert latency_increase_p_value(same, base) >= 0.01
    assert latency_increase_p_value(base - 20.0, base) > 0.5  # better is not "greater"

    tuner = _FakeTuner()
    controller = AlphaController(tuner)  # type: ignore[arg-type]
    assert controller.alpha == 0.0
    first = controller.on_window_closed(_window_of(base[:12]))
    assert first.retuned is not None and controller.alpha == 0.3 and tuner.calls == 1
    stationary = controller.on_window_closed(_window_of(same[:12]))
    assert stationary.retuned is None and tuner.calls == 1
    shifted = controller.on_window_closed(_window_of(worse[:12] + 40.0))
    assert shifted.retuned is not None and shifted.p_value is not None and shifted.p_value < 0.01


def test_recorder_groups_jobs_by_arrival_window() -> None:
    recorder = WindowRecorder(window_s=100.0)
    for job in make_jobs(num_jobs=30, rate=0.1, seed=1):
        recorder.record(job, 1.0)
    windows = recorder.windows()
    assert all(w.start_s <= j.arrival_s < w.start_s + 100.0 for w in windows for j in w.jobs)
    assert sum(len(w.jobs) for w in windows) == 30


def test_bad_config_is_rejected() -> None:
    from slosched.core.errors import ConfigError

    with pytest.raises(ConfigError, match="coarse_grid"):
        TuneConfig(INSTANCES, coarse_grid=(0.0, 1.5))
    with pytest.raises(ConfigError, match="allowed: serial, process, ray"):
        make_executor("threads")
