"""A run cut short once its misses decide it (``planning/probe.py``): the cut is the whole run's prefix, its
bound holds, and the verdict over seeds matches the figure shown."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.planning.test_sweep import SMALL

from slosched.core.request import Outcome
from slosched.evaluation.steady import steady_jobs
from slosched.evaluation.workbench import Candidate, Workbench, measure
from slosched.planning.probe import CUTS, Probe, lower_median, miss_bound, probe, seeds_needed, seeds_verdict
from slosched.planning.workload import candidates_of, instances_with_counts, workbench_of
from slosched.scenario.config import parse_scenario

OVERLOAD = 4.0  # jobs/s: one A100 of the small scenario carries about 2


@pytest.fixture(scope="module")
def setup() -> tuple[Workbench, Candidate]:
    scenario = parse_scenario(SMALL)
    bench = workbench_of(scenario, instances_with_counts(scenario, {"a6000": 0}), 40, "one-a100")
    (candidate,) = candidates_of(scenario, ["least-tokens+chunked-fcfs"])
    return bench, candidate


def test_a_cut_run_is_the_whole_runs_prefix_and_bounds_its_attainment(setup: tuple[Workbench, Candidate]) -> None:
    from dataclasses import replace

    bench, candidate = setup
    sized = bench.sized(steady_jobs(bench, 0, OVERLOAD))
    jobs, history = sized.workload(OVERLOAD, 0)
    whole = sized.run_fn(candidate, sized.instances, jobs, sized.options, 0, history)
    judged = measure(whole, OVERLOAD, 0).judged
    by_id = {job.id: job for job in whole.jobs}
    arrivals = [job.arrival_s for job in jobs]
    for share in CUTS:
        horizon = arrivals[0] + share * (arrivals[-1] - arrivals[0])
        cut = sized.run_fn(candidate, sized.instances, jobs, replace(sized.options, horizon_s=horizon), 0, history)
        finished = [job for job in cut.jobs if job.outcome is Outcome.COMPLETED]
        assert finished and len(finished) < len(cut.jobs)  # cut mid-run
        for job in finished:  # ended as in the whole run
            assert (by_id[job.id].finish_s, by_id[job.id].deadline_met) == (job.finish_s, job.deadline_met)
        for job in cut.jobs:
            if job.outcome is not Outcome.COMPLETED and job.arrival_s + job.slo_s < horizon:
                assert not by_id[job.id].deadline_met  # its deadline passed unfinished: missed there too
        assert miss_bound(cut, horizon, 0.9)[0] >= judged


def test_probe_cuts_an_overloaded_run_and_runs_a_carried_one_whole(setup: tuple[Workbench, Candidate]) -> None:
    bench, candidate = setup
    for rate in (OVERLOAD, 1.0):
        found = probe(bench, candidate, 0, rate, 0.9)
        whole = bench.sized(steady_jobs(bench, 0, rate)).run(candidate, rate, 0).judged
        assert found.passes(0.9) == (whole >= 0.9)
        if found.exact:
            assert found.value == whole
    assert not probe(bench, candidate, 0, OVERLOAD, 0.9).exact  # decided by a cut run
    assert probe(bench, candidate, 0, 1.0, 0.9) == Probe(
        bench.sized(steady_jobs(bench, 0, 1.0)).run(candidate, 1.0, 0).judged
    )


@given(st.lists(st.booleans(), min_size=1, max_size=7))
def test_the_verdict_over_seeds_is_a_majority_and_the_lower_median_shows_it(passes: list[bool]) -> None:
    runs: list[Probe] = []
    verdict = None
    for index, ok in enumerate(passes):
        runs.append(Probe(0.99 - 0.001 * index if ok else 0.5 + 0.01 * index))
        verdict = seeds_verdict(runs, len(passes), 0.9)
        if verdict is not None:
            break
    assert verdict == (sum(passes) >= seeds_needed(len(passes)))  # stopping early never changes it
    assert lower_median(runs).passes(0.9) == verdict
    assert seeds_needed(2) == 2 and seeds_needed(3) == 2
