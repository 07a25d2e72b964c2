"""Session fixture: two real vLLM CPU servers (tiny generated models, 2 and 8 layers), shared by every
``@pytest.mark.vllm`` test and stopped by PID (their process groups) at the end of the session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from slosched.serve.up import ServerAddress, default_vllm_python, start_servers, stop_servers, wait_ready


@dataclass(frozen=True)
class _Running:
    name: str
    url: str


@pytest.fixture(scope="session")
def vllm_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ServerAddress]]:
    existing = os.environ.get("SLOSCHED_VLLM_URLS")  # reuse servers already running (development loop)
    if existing:
        yield [_Running(f"vllm-{i}", url) for i, url in enumerate(existing.split(","))]
        return
    python = default_vllm_python()
    if not python.exists():
        message = f"vLLM virtualenv not found at {python} (run `make vllm-venv`)"
        if os.environ.get("SLOSCHED_REQUIRE_VLLM"):
            pytest.fail(message)
        pytest.skip(message)
    servers = start_servers([2, 8], tmp_path_factory.mktemp("vllm"), python=python, priority=True)
    try:
        wait_ready(servers, timeout_s=900)
        yield list(servers)
    finally:
        stop_servers(servers)
