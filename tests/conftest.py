"""Shared factories: instances, jobs and small clusters for fast CPU-only tests; and the session fixture of
two real vLLM CPU servers (tiny generated models, 2 and 8 layers) shared by every ``@pytest.mark.vllm``
test that asks for ``vllm_servers``, stopped by PID (their process groups) at the end of the session."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

from slosched.core.instance import InstanceSpec
from slosched.core.job import CallSpec, JobSpec, single_job
from slosched.devtools.up import ServerAddress, default_vllm_python, start_servers, stop_servers, wait_ready

# Property tests draw the same examples on every run ("repeatable"), so a test run is deterministic and CI
# cannot fail by the luck of a new draw; HYPOTHESIS_PROFILE=explore draws fresh examples to hunt for bugs.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

# Gateways (in process and spawned) sign their vllm_xargs and plugins verify them with this key, as a
# deployment with SLOSCHED_XARGS_KEY set on both sides does.
TEST_XARGS_KEY = "slosched-test-xargs-key-0123456789"
os.environ.setdefault("SLOSCHED_XARGS_KEY", TEST_XARGS_KEY)

# Tests patch module globals (a shorter steady-state window, say) that a task cache's key cannot see: a cache
# set in the developer's shell must not hand their results to a real bench, nor a bench's to a test.
os.environ.pop("SLOSCHED_TASK_CACHE", None)

# The Ctrl-C tests need SIGINT as a terminal's foreground job has it. A shell starts a background job
# (`make test-fast &`) with SIGINT ignored, every child inherits that, and Python then installs no
# KeyboardInterrupt handler: the CLIs these tests interrupt ignored the signal and never exited (the bench test
# timed out twice that way, in background runs only). Restored here, children get the default after exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def make_instance(name: str = "i0", gpu: str = "A100-80G", **overrides: object) -> InstanceSpec:
    fields: dict[str, object] = {"model": "Llama-3-8B", "max_running": 64, "max_batched_tokens": 2048}
    fields.update(overrides)
    return InstanceSpec(name=name, gpu=gpu, **fields)  # type: ignore[arg-type]


def make_cluster(num_a100: int = 2, num_a6000: int = 2, **overrides: object) -> tuple[InstanceSpec, ...]:
    specs = [make_instance(f"a100-{i}", "A100-80G", **overrides) for i in range(num_a100)]
    specs += [make_instance(f"a6000-{i}", "A6000", **overrides) for i in range(num_a6000)]
    return tuple(specs)


def make_jobs(
    num_jobs: int = 50,
    rate: float = 4.0,
    seed: int = 0,
    mean_in: int = 600,
    mean_out: int = 120,
    prefix_share: float = 0.0,
) -> list[JobSpec]:
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, num_jobs))
    inputs = np.maximum(rng.lognormal(np.log(mean_in), 0.6, num_jobs).astype(int), 1)
    outputs = np.maximum(rng.lognormal(np.log(mean_out), 0.6, num_jobs).astype(int), 1)
    jobs = []
    for index in range(num_jobs):
        prefix_tokens = int(inputs[index] * prefix_share)
        call = CallSpec(
            input_tokens=int(inputs[index]),
            output_tokens=int(outputs[index]),
            max_output_tokens=int(outputs[index]) + 64,
            prefix_key="shared-system-prompt" if prefix_tokens else None,
            prefix_tokens=prefix_tokens,
        )
        jobs.append(single_job(f"j{index}", float(arrivals[index]), call, template="chat"))
    return jobs


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@dataclass(frozen=True)
class _Running:
    name: str
    url: str


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The vLLM virtualenv's interpreter; skips the test without it (fails under SLOSCHED_REQUIRE_VLLM)."""
    python = default_vllm_python()
    if not python.exists():
        message = f"vLLM virtualenv not found at {python} (run `make vllm-venv`)"
        if os.environ.get("SLOSCHED_REQUIRE_VLLM"):
            pytest.fail(message)
        pytest.skip(message)
    return python


@pytest.fixture(scope="session")
def vllm_servers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[ServerAddress]]:
    existing = os.environ.get("SLOSCHED_VLLM_URLS")  # reuse servers already running (development loop)
    if existing:
        yield [_Running(f"vllm-{i}", url) for i, url in enumerate(existing.split(","))]
        return
    python: Path = request.getfixturevalue("vllm_python")  # only needed when no servers are given
    servers = start_servers([2, 8], tmp_path_factory.mktemp("vllm"), python=python, priority=True)
    try:
        wait_ready(servers, timeout_s=900)
        yield list(servers)
    finally:
        stop_servers(servers)
