"""``devtools.core_speed``: every core's speed in windows, and the figures the fidelity page shows."""

from __future__ import annotations

import os

import pytest

from slosched.devtools.core_speed import CoreSpeed, cpu_description, measure


def test_every_core_is_measured_in_windows() -> None:
    before = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    speed = measure(seconds=0.3, window_s=0.1)
    assert {name: os.environ.get(name) for name in before} == before  # the workers' settings are not left behind
    assert sorted(speed.rates) == sorted(os.sched_getaffinity(0))
    for rates in speed.rates.values():
        assert len(rates) >= 2 and all(rate > 0 for rate in rates)


def test_figures_of_a_core_that_slowed_down() -> None:
    speed = CoreSpeed(0.5, {0: [100.0, 100.0, 70.0, 100.0], 1: [90.0, 80.0, 90.0, 80.0]})
    figures = speed.to_json_dict()
    assert figures["window_s"] == 0.5
    assert figures["cores"]["0"]["slowest_over_fastest"] == pytest.approx(0.7)
    assert figures["cores"]["1"]["windows"] == 4
    assert -1.0 <= figures["cross_core_correlation"] <= 1.0
    assert "cross_core_correlation" not in CoreSpeed(0.5, {0: [1.0, 2.0]}).to_json_dict()


def test_the_processor_is_named_with_its_widest_vector_extension() -> None:
    amd = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx avx2 fma\n\nprocessor\t: 1\n"
    assert cpu_description(amd) == {"model": "AMD EPYC", "vector": "avx2"}
    intel = "model name\t: Intel(R) Xeon(R)\nflags\t\t: avx avx2 avx512f avx512bw\n"
    assert cpu_description(intel)["vector"] == "avx512"
    assert cpu_description("") == {"model": "unknown", "vector": "none"}
