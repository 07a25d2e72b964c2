"""Online alpha tuning in the bench: windows close one window late, the first is tuned, the t-test decides
the rest, and the drift trace really changes mid-run."""

from __future__ import annotations

from slosched.bench.hexgen.online import drift_trace, run_online
from slosched.bench.hexgen.setup import cluster
from slosched.sim.options import SimOptions
from slosched.tuning.alpha import AlphaTuner, TuneConfig


def test_drift_trace_switches_to_hard_jobs_halfway() -> None:
    jobs = drift_trace(0.5, 40, seed=2)
    assert len({job.id for job in jobs}) == len(jobs)
    assert [job.arrival_s for job in jobs] == sorted(job.arrival_s for job in jobs)
    first, second = jobs[: len(jobs) // 2], jobs[len(jobs) // 2 :]
    assert not any(job.id.startswith("hard") for job in first)
    assert all(job.id.startswith("hard") for job in second)


def test_online_run_tunes_the_first_window_and_tests_the_others() -> None:
    instances = cluster("paper-tp2")
    jobs = drift_trace(0.3, 60, seed=1)
    tuner = AlphaTuner(TuneConfig(instances, coarse_grid=(0.0, 1.0), fine_step=1.0))
    run = run_online(instances, jobs, SimOptions(slo_scale=4.0), tuner, window_s=100.0)
    assert len(run.result.jobs) == len(jobs)
    first, *later = run.steps
    assert first.num_jobs and first.p_value is None and first.retuned
    assert later and all(step.p_value is not None for step in later)
    assert any(step.num_backlog for step in run.steps)  # windows start from a busy cluster
