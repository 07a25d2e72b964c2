"""Workloads: generators registered by name, arrival processes, JSONL traces and the bundled data.

Everything random takes a ``numpy.random.Generator`` (or a seed) and is deterministic in it.
"""

from slosched.workloads.arrivals import ArrivalSpec, gamma, on_off, poisson, replay
from slosched.workloads.bundled import AzureTrace, azure_trace, workload_facts, workload_section
from slosched.workloads.generators import (
    GENERATORS,
    WorkloadGenerator,
    generate_jobs,
    generator_names,
    get_generator,
    make_workload,
)
from slosched.workloads.trace_io import job_from_line, job_to_line, load_jobs, parse_jobs, save_jobs

__all__ = [
    "GENERATORS",
    "ArrivalSpec",
    "AzureTrace",
    "WorkloadGenerator",
    "azure_trace",
    "gamma",
    "generate_jobs",
    "generator_names",
    "get_generator",
    "job_from_line",
    "job_to_line",
    "load_jobs",
    "make_workload",
    "on_off",
    "parse_jobs",
    "poisson",
    "replay",
    "save_jobs",
    "workload_facts",
    "workload_section",
]
