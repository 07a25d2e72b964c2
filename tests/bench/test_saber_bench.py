import pytest

from slosched.bench.saber import bench_config
from slosched.bench.saber_runs import code_jobs, run_policy, task_max_tokens
from slosched.core.errors import ConfigError

PAPER_SLA = {"code-qna": 1.0, "code-generation": 8.0, "code-summary": 1.0, "code-translation": 12.0}


def test_jobs_carry_task_max_tokens_and_slas() -> None:
    caps = task_max_tokens(0.9)
    assert caps["code-qna"] < caps["code-generation"] < caps["code-translation"]
    jobs = code_jobs("W3", 5.0, 0, caps)
    assert len(jobs) == 100
    for job in jobs:
        call = job.stages[0].calls[0]
        assert call.max_output_tokens == caps[job.template] >= call.output_tokens
        assert job.slo_s == PAPER_SLA[job.template]
    measured = {task: 2.0 * sla for task, sla in PAPER_SLA.items()}
    assert {job.slo_s for job in code_jobs("W1", 5.0, 0, caps, measured)} <= set(measured.values())


def test_goodput_counts_requests_within_their_sla() -> None:
    jobs = code_jobs("W2", 1.0, 0, task_max_tokens(0.9))[:20]
    outcome = run_policy(jobs, "static-concurrency", {"cap": 50}, seed=0)
    assert len(outcome.ratios) == 20
    assert outcome.goodput == pytest.approx(sum(ratio <= 1.0 for ratio in outcome.ratios) / 20)


def test_sla_mode_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLOSCHED_SABER_SLA", "loose")
    with pytest.raises(ConfigError, match=r"SLOSCHED_SABER_SLA.*allowed"):
        bench_config(quick=True)
    monkeypatch.setenv("SLOSCHED_SABER_SLA", "measured")
    assert bench_config(quick=True).sla_mode == "measured"
