"""Alpha tuner: finds the best alpha by replay, same answer on every executor; t-test retune trigger."""

from __future__ import annotations

import importlib.util
from dataclasses import replace

import numpy as np
import pytest

from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.tuning.alpha import AlphaTuner, ReplayScore, TuneConfig, TuneResult, rebase
from slosched.tuning.executors import ProcessExecutor, SerialExecutor, make_executor
from slosched.tuning.window import (
    AlphaController,
    Window,
    WindowRecorder,
    latency_increase_p_value,
    remaining_work,
)
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
        self.backlogs: list[list[JobSpec]] = []

    def retune(self, jobs: list[JobSpec], backlog: list[JobSpec], start_s: float) -> TuneResult:
        self.calls += 1
        self.backlogs.append(list(backlog))
        return TuneResult(0.3, {0.3: ReplayScore(1.0, 1.0)}, 0.0)


def _window_of(latencies: np.ndarray) -> Window:
    return Window(0.0, _window()[: len(latencies)], latencies.tolist())


def test_t_test_fires_on_a_shifted_window_and_not_on_a_stationary_one() -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(60.0, 8.0, 40)
    same = rng.normal(60.0, 8.0, 40)
    worse = rng.normal(75.0, 8.0, 40)
    assert latency_increase_p_value(worse.tolist(), base.tolist()) < 0.01
    assert latency_increase_p_value(same.tolist(), base.tolist()) >= 0.01
    assert latency_increase_p_value((base - 20.0).tolist(), base.tolist()) > 0.5  # better is not "greater"

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


def _with_slo(jobs: list[JobSpec], slo_s: float) -> list[JobSpec]:
    return [replace(job, slo_s=slo_s) for job in jobs]


def test_slo_objective_maximises_attainment_and_breaks_ties_by_mean_latency() -> None:
    window = _with_slo(_window(), 30.0)
    slo = AlphaTuner(CONFIG, SerialExecutor()).retune(window)
    best = max(slo.scores.values(), key=lambda score: (score.attainment, -score.mean_latency_s))
    assert slo.objective == "slo" and slo.scores[slo.alpha] == best
    paper = AlphaTuner(replace(CONFIG, objective="mean-latency"), SerialExecutor()).retune(window)
    assert paper.mean_latency_s[paper.alpha] == min(paper.mean_latency_s.values())
    assert ReplayScore(0.9, 50.0).key("slo") < ReplayScore(0.8, 10.0).key("slo")
    assert ReplayScore(0.8, 10.0).key("mean-latency") < ReplayScore(0.9, 50.0).key("mean-latency")


def test_backlog_is_load_but_not_scored_and_can_change_the_answer() -> None:
    tuner = AlphaTuner(CONFIG, SerialExecutor())
    window = [replace(job, arrival_s=job.arrival_s + 100.0) for job in _window()[:6]]
    queued = make_jobs(num_jobs=20, rate=0.2, seed=5, mean_in=1500, mean_out=150)
    backlog = [replace(job, id=f"old-{job.id}", arrival_s=100.0) for job in queued]
    idle = tuner.evaluate_scores(window, [0.0, 1.0], (), 100.0)
    busy = tuner.evaluate_scores(window, [0.0, 1.0], backlog, 100.0)
    assert busy[1.0].mean_latency_s > idle[1.0].mean_latency_s  # the window's jobs waited behind the backlog
    # From idle, speed wins (alpha 1); behind a backlog that fills the fast GPU, balance wins (alpha 0).
    assert idle[1.0].mean_latency_s < idle[0.0].mean_latency_s
    assert busy[0.0].mean_latency_s < busy[1.0].mean_latency_s
    everything = tuner.evaluate_scores([*backlog, *window], [0.0], (), 100.0)[0.0]
    assert everything.mean_latency_s != busy[0.0].mean_latency_s  # backlog jobs are not scored


def _chain(job_id: str, arrival_s: float, slo_s: float) -> JobSpec:
    stages = tuple(StageSpec(f"S{i}", (CallSpec(400, 40),)) for i in range(4))
    return JobSpec(job_id, JobKind.WORKFLOW, arrival_s, stages, slo_s=slo_s)


def test_remaining_work_keeps_what_was_left_at_the_window_start() -> None:
    job = _chain("w", 90.0, 30.0)
    done = {"S0": 95.0, "S1": 99.0, "S2": 104.0, "S3": 110.0}
    left = remaining_work(job, 100.0, 110.0, done)
    assert left is not None and [s.name for s in left.stages] == ["S2", "S3"]
    assert left.arrival_s == 100.0 and left.slo_s == pytest.approx(20.0)  # deadline 120 s unchanged
    assert left.stages[0].after == () and left.stages[1].after == ("S2",)
    estimated = remaining_work(job, 100.0, 110.0)  # half the latency elapsed: half the stages dropped
    assert estimated is not None and [s.name for s in estimated.stages] == ["S2", "S3"]
    late = remaining_work(_chain("late", 10.0, 30.0), 100.0, 110.0, done)
    assert late is not None and late.slo_s is not None and 0.0 < late.slo_s < 0.01
    assert remaining_work(job, 100.0, 99.0, done) is None  # finished before the window


def test_recorder_gives_later_windows_their_backlog() -> None:
    recorder = WindowRecorder(window_s=100.0)
    recorder.record(_chain("long", 50.0, 500.0), 200.0)  # in the system at 100 s and 200 s
    recorder.record(_chain("short", 120.0, 500.0), 10.0)
    windows = {w.start_s: w for w in recorder.windows()}
    assert [j.id for j in windows[100.0].backlog] == ["long"] and [j.id for j in windows[100.0].jobs] == ["short"]
    assert [j.id for j in windows[200.0].backlog] == ["long"] and not windows[200.0].jobs
    assert not windows[0.0].backlog

    tuner = _FakeTuner()
    controller = AlphaController(tuner)  # type: ignore[arg-type]
    controller.on_window_closed(windows[100.0])
    assert [j.id for j in tuner.backlogs[0]] == ["long"]
