"""Workload generators: valid, deterministic jobs with the published length statistics."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import numpy as np
import pytest

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.core.job import JobKind, JobSpec, validate_job
from slosched.workloads.bundled import azure_trace, workload_section
from slosched.workloads.chat import length_cap
from slosched.workloads.code import task_weights
from slosched.workloads.generators import generate_jobs, generator_names, make_workload

POISSON = {"process": "poisson", "rate": 4.0}
CHAT_CODE_MIX = {"components": {"sharegpt": 0.7, "code-w3": {"weight": 0.3, "params": {"slo": "none"}}}}
EXPECTED_NAMES = {
    "azure-conv",
    "azure-code",
    "flowgpt",
    "coding",
    "sharegpt",
    "summarization",
    "code-qna",
    "code-generation",
    "code-summary",
    "code-translation",
    "code-w1",
    "code-w2",
    "code-w3",
    "mix",
}


def _params(name: str) -> dict[str, Any]:
    return CHAT_CODE_MIX if name == "mix" else {}


def _calls(jobs: list[JobSpec]) -> tuple[np.ndarray, np.ndarray]:
    calls = [job.stages[0].calls[0] for job in jobs]
    return np.array([c.input_tokens for c in calls]), np.array([c.output_tokens for c in calls])


def test_registry_names() -> None:
    # Other issues' generators (workflows, relQueries) are tested in their own files.
    assert set(generator_names()) >= EXPECTED_NAMES


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_generator_makes_valid_single_jobs(name: str) -> None:
    rng = np.random.default_rng(5)
    arrivals = np.sort(rng.uniform(0, 100, 400))
    jobs = generate_jobs(name, _params(name), arrivals, rng)
    assert [job.arrival_s for job in jobs] == arrivals.tolist()
    assert len({job.id for job in jobs}) == len(jobs)
    for job in jobs:
        validate_job(job)
        assert job.kind is JobKind.SINGLE and job.num_calls == 1
        assert job.template
        call = job.stages[0].calls[0]
        assert call.max_output_tokens is not None and call.max_output_tokens >= call.output_tokens
    if name != "mix":
        assert all(job.id == f"{name}-{index}" for index, job in enumerate(jobs))


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_generator_is_deterministic_by_seed(name: str) -> None:
    first = make_workload(name, POISSON, 300, _params(name), seed=11)
    assert first == make_workload(name, POISSON, 300, _params(name), seed=11)
    assert first != make_workload(name, POISSON, 300, _params(name), seed=12)


def test_lengths_do_not_depend_on_the_arrival_process() -> None:
    bursty = {"process": "gamma", "rate": 9.0, "cv": 4.0}
    calm, burst = (
        make_workload("sharegpt", POISSON, 200, seed=3),
        make_workload("sharegpt", bursty, 200, seed=3),
    )
    assert _calls(calm)[0].tolist() == _calls(burst)[0].tolist()


def test_unknown_generator_and_params() -> None:
    with pytest.raises(UnknownNameError, match="known names: azure-code"):
        make_workload("azure-chat", POISSON, 10)
    with pytest.raises(ConfigError, match=r"unknown \['max_token'\]; allowed: .*max_tokens"):
        make_workload("coding", POISSON, 10, {"max_token": 10})
    with pytest.raises(ConfigError, match=r"code-w1\.slo: got 'paperr'; allowed: paper, none"):
        make_workload("code-w1", POISSON, 10, {"slo": "paperr"})
    with pytest.raises(ConfigError, match="max_tokens: expected an integer >= 1"):
        make_workload("azure-conv", POISSON, 10, {"max_tokens": 0})
    with pytest.raises(ConfigError, match="arrivals"):
        generate_jobs("coding", {}, np.array([2.0, 1.0]), np.random.default_rng(0))


def test_azure_empirical_lengths_are_trace_rows() -> None:
    trace = azure_trace("conv")
    rows = set(zip(trace.input_tokens.tolist(), np.minimum(trace.output_tokens, 2048).tolist(), strict=True))
    jobs = make_workload("azure-conv", POISSON, 2000, {"max_input_tokens": 100_000}, seed=1)
    inputs, outputs = _calls(jobs)
    assert set(zip(inputs.tolist(), outputs.tolist(), strict=True)) <= rows


def test_azure_lognormal_and_clipping() -> None:
    params = {"lengths": "lognormal", "max_input_tokens": 3000, "max_output_tokens": 500, "max_tokens": 400}
    jobs = make_workload("azure-code", POISSON, 5000, params, seed=2)
    inputs, outputs = _calls(jobs)
    assert inputs.max() == 3000 and outputs.max() == 400
    assert {job.stages[0].calls[0].max_output_tokens for job in jobs} == {400}
    facts = workload_section("azure_llm_2023", "code")
    # The lognormal's median is exp(mu); the json's p50 is the raw trace's, which the fit does not keep.
    assert np.median(inputs) == pytest.approx(np.exp(facts["in"]["mu"]), rel=0.05)
    assert np.median(outputs) == pytest.approx(np.exp(facts["out"]["mu"]), rel=0.05)


@pytest.mark.parametrize("name", ["coding", "sharegpt", "summarization"])
def test_chat_lengths_match_published_stats(name: str) -> None:
    stats = workload_section("chat_and_long_context", "workloads", name)
    inputs, outputs = _calls(make_workload(name, POISSON, 20_000, seed=4))
    for values, published in ((inputs, stats["prompt"]), (outputs, stats["output"])):
        assert values.mean() == pytest.approx(published["mean"], rel=0.06)
        assert values.std() == pytest.approx(published["std"], rel=0.2)
        assert values.max() == published["p99"]  # clipped at the p99 ...
        assert np.percentile(values, 99) == published["p99"]  # ... which stays the p99


def test_chat_clip_none_keeps_the_tail() -> None:
    inputs, _ = _calls(make_workload("sharegpt", POISSON, 20_000, {"clip": "none"}, seed=4))
    assert inputs.max() > workload_section("chat_and_long_context", "workloads", "sharegpt", "prompt")["p99"]


def test_flowgpt_output_p99_typo_uses_fitted_p99() -> None:
    stats = workload_section("chat_and_long_context", "workloads", "flowgpt", "output")
    assert stats["p99"] < stats["mean"]  # the published typo this handles
    cap = length_cap(stats)
    assert 900 < cap < 1050
    _, outputs = _calls(make_workload("flowgpt", POISSON, 20_000, seed=4))
    assert outputs.max() <= cap
    assert outputs.mean() == pytest.approx(stats["mean"], rel=0.06)


@pytest.mark.parametrize("name", ["code-qna", "code-generation", "code-summary", "code-translation"])
def test_code_task_lengths_and_slo(name: str) -> None:
    fact = workload_section("code_assistant", "tasks", name.replace("-", "_"))
    jobs = make_workload(name, POISSON, 10_000, seed=6)
    inputs, outputs = _calls(jobs)
    assert inputs.mean() == pytest.approx(fact["in"]["target_mean"], rel=0.06)
    assert outputs.mean() == pytest.approx(fact["out"]["target_mean"], rel=0.06)
    assert {job.slo_s for job in jobs} == {fact["slo_s"]}
    assert {job.template for job in jobs} == {name}


def test_code_slo_rules() -> None:
    assert {job.slo_s for job in make_workload("code-w3", POISSON, 200, {"slo": "none"})} == {None}
    scaled = make_workload("code-qna", POISSON, 50, {"slo_scale": 2.5})
    assert {job.slo_s for job in scaled} == {2.5}


@pytest.mark.parametrize("name", ["code-w1", "code-w2", "code-w3"])
def test_code_mixes_respect_weights(name: str) -> None:
    jobs = make_workload(name, POISSON, 20_000, seed=8)
    counts = Counter(job.template for job in jobs)
    slo_by_task = {
        task: workload_section("code_assistant", "tasks", task.replace("-", "_"))["slo_s"]
        for task in task_weights(name)
    }
    for task, weight in task_weights(name).items():
        assert counts[task] / len(jobs) == pytest.approx(weight, abs=0.015)
    assert all(job.slo_s == slo_by_task[job.template] for job in jobs)


def test_mix_weights_and_nested_params() -> None:
    jobs = make_workload("mix", POISSON, 10_000, CHAT_CODE_MIX, seed=9)
    chat = [job for job in jobs if job.template == "sharegpt"]
    assert len(chat) / len(jobs) == pytest.approx(0.7, abs=0.02)
    code = [job for job in jobs if job.template != "sharegpt"]
    assert {job.template for job in code} == set(task_weights("code-w3"))
    assert {job.slo_s for job in code} == {None}  # the nested params reached code-w3
    assert all(job.id.startswith(("sharegpt-", "code-w3-")) for job in jobs)


@pytest.mark.parametrize(
    ("components", "fragment"),
    [
        ({}, "non-empty mapping"),
        ({"shargpt": 1.0}, "unknown name 'shargpt'"),
        ({"sharegpt": 0}, r"mix.components.sharegpt.weight: must be a finite number > 0"),
        ({"sharegpt": "lots"}, "expected a number"),
        ({"sharegpt": {"weight": 1, "param": {}}}, r"unknown \['param'\]"),
        ({"sharegpt": {"weight": 1, "params": {"clip": "p90"}}}, "sharegpt.clip: got 'p90'"),
        ({"code-w1": 1, "mix": {"weight": 1, "params": {"components": {"code-w1": 1}}}}, "ids collide"),
    ],
)
def test_mix_rejects_bad_components(components: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        make_workload("mix", POISSON, 200, {"components": components})


def test_hundred_thousand_jobs_are_fast() -> None:
    start = time.perf_counter()
    jobs = make_workload("code-w3", POISSON, 100_000, seed=0)
    elapsed = time.perf_counter() - start
    assert len(jobs) == 100_000
    assert elapsed < 3.0  # about 0.5 s on a slow CI core; this guards against accidental O(n^2)
