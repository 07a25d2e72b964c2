"""Per-tenant SLO scales: tenants of different tightness on one cluster (SimOptions.tenant_slo_scale)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from slosched.core.job import CallSpec, JobSpec, single_job
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from tests.conftest import make_cluster

PAIR = PolicyPair.parse("least-tokens+chunked-fcfs")


def _twins() -> list[JobSpec]:
    """Four identical calls (one template) 100 s apart, of tenants tight, loose, default and one with its own SLO."""
    call = CallSpec(input_tokens=500, output_tokens=100, max_output_tokens=256)
    jobs = [single_job(f"j{i}", 100.0 * i, call, template="t") for i in range(4)]
    return [
        replace(jobs[0], tenant="tight"),
        replace(jobs[1], tenant="loose"),
        jobs[2],
        replace(jobs[3], tenant="tight", slo_s=42.0),
    ]


def test_a_listed_tenant_gets_its_scale_others_the_default_and_a_trace_slo_wins() -> None:
    options = SimOptions(noise_sigma=0.0, slo_scale=4.0, tenant_slo_scale=(("tight", 2.0), ("loose", 8.0)))
    result = simulate(make_cluster(1, 1), _twins(), PAIR, 0, options)
    slos = {job.id: job.slo_s for job in result.jobs}
    basis = slos["j2"] / 4.0  # the same estimate for every job of the template (leak-free: lengths unused)
    assert slos["j0"] == pytest.approx(2.0 * basis)
    assert slos["j1"] == pytest.approx(8.0 * basis)
    assert slos["j3"] == 42.0


def test_tenant_scales_alone_give_unlisted_tenants_no_deadline() -> None:
    options = SimOptions(noise_sigma=0.0, tenant_slo_scale=(("tight", 2.0),))
    result = simulate(make_cluster(1, 1), _twins(), PAIR, 0, options)
    slos = {job.id: job.slo_s for job in result.jobs}
    assert math.isfinite(slos["j0"]) and slos["j0"] > 0
    assert math.isinf(slos["j1"]) and math.isinf(slos["j2"])


def test_scale_of_falls_back_to_slo_scale() -> None:
    options = SimOptions(slo_scale=3.0, tenant_slo_scale=(("a", 1.5),))
    assert options.scale_of("a") == 1.5
    assert options.scale_of("b") == 3.0
    assert SimOptions().scale_of("a") is None
