"""LENS and PRISM inside the simulator: every job ends, runs are deterministic, late joiners wait."""

from __future__ import annotations

from dataclasses import replace

from slosched.core.instance import InstanceSpec
from slosched.core.request import Outcome
from slosched.metrics.summary import summarize
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from slosched.workloads.generators import make_workload

SPECS = (
    InstanceSpec(name="h100", gpu="H100", model="Llama-3-8B", stack="vidur"),
    InstanceSpec(name="a6000", gpu="A6000", model="Llama-3-8B", stack="vidur"),
)
OPTIONS = SimOptions(belief_refit_s=0.25)


def test_lens_prism_completes_every_job_deterministically() -> None:
    jobs = make_workload("flowgpt", {"process": "poisson", "rate": 4.0}, 80, {"tpot_slo_s": 0.03}, seed=2)
    first = simulate(SPECS, jobs, PolicyPair.parse("prism+lens"), 3, OPTIONS)
    second = simulate(SPECS, jobs, PolicyPair.parse("prism+lens"), 3, OPTIONS)
    assert all(job.outcome is Outcome.COMPLETED for job in first.jobs)
    assert [(r.id, r.instance, r.finish_s) for r in first.requests] == [
        (r.id, r.instance, r.finish_s) for r in second.requests
    ]
    assert {r.instance for r in first.requests} == {"h100", "a6000"}


def test_lens_holds_tpot_where_prefill_first_breaks_it() -> None:
    jobs = make_workload("flowgpt", {"process": "poisson", "rate": 5.0}, 150, {"tpot_slo_s": 0.012}, seed=4)
    one = SPECS[:1]
    lens = summarize(simulate(one, jobs, PolicyPair.parse("round-robin+lens"), 1, OPTIONS))
    fcfs = summarize(simulate(one, jobs, PolicyPair.parse("round-robin+fcfs"), 1, OPTIONS))
    assert lens.slo_attainment > fcfs.slo_attainment + 0.2


def test_a_late_instance_gets_nothing_before_it_joins() -> None:
    jobs = make_workload("sharegpt", {"process": "poisson", "rate": 20.0}, 120, {}, seed=5)
    specs = (SPECS[0], replace(SPECS[0], name="late", available_from_s=3.0))
    result = simulate(specs, jobs, PolicyPair.parse("prism+lens"), 1, OPTIONS)
    late = [r for r in result.requests if r.instance == "late"]
    assert late and min(r.arrival_s for r in late) >= 3.0
