"""Endpoints from an InferencePool's pods (fixture objects, no cluster) and the picker's config errors."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from slosched.cli.main import run
from slosched.core.errors import ConfigError
from slosched.picker.config import KubernetesConfig, parse_picker_config
from slosched.picker.kube import ClusterSource, pool_endpoints

POOL_V1 = {
    "apiVersion": "inference.networking.k8s.io/v1",
    "kind": "InferencePool",
    "spec": {"selector": {"matchLabels": {"app": "vllm"}}, "targetPorts": [{"number": 8000}]},
}
POOL_V1ALPHA2 = {
    "apiVersion": "inference.networking.x-k8s.io/v1alpha2",
    "kind": "InferencePool",
    "spec": {"selector": {"app": "vllm"}, "targetPortNumber": 8001},
}


def pod(name: str, ip: str, labels: dict[str, str], ready: bool = True, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": labels}
    if deleting:
        metadata["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return {"metadata": metadata, "status": {"podIP": ip, "conditions": [condition]}}


PODS = [
    pod("b", "10.0.0.2", {"app": "vllm", "slosched.io/model": "llama", "slosched.io/gpu": "H100"}),
    pod("a", "10.0.0.1", {"app": "vllm", "slosched.io/model": "llama"}),
    pod("starting", "10.0.0.3", {"app": "vllm"}, ready=False),
    pod("leaving", "10.0.0.4", {"app": "vllm"}, deleting=True),
    pod("other", "10.0.0.5", {"app": "sglang"}),
    {"metadata": {"name": "no-ip", "labels": {"app": "vllm"}}, "status": {"conditions": []}},
]


def test_ready_matching_pods_become_endpoints_on_the_pool_s_port() -> None:
    config = KubernetesConfig(pool="p", defaults={"gpu": "A100", "max_model_len": 8192})
    endpoints = pool_endpoints(POOL_V1, PODS, config)
    assert [(e.address, e.model, e.gpu, e.max_model_len) for e in endpoints] == [
        ("10.0.0.1:8000", "llama", "A100", 8192),  # the default GPU where the pod names none
        ("10.0.0.2:8000", "llama", "H100", 8192),
    ]
    assert [e.address for e in pool_endpoints(POOL_V1ALPHA2, PODS, config)] == ["10.0.0.1:8001", "10.0.0.2:8001"]


def test_a_pool_without_selector_or_port_and_bad_defaults_are_errors_naming_the_field() -> None:
    config = KubernetesConfig(pool="p")
    with pytest.raises(ConfigError, match=r"kubernetes\.pool"):
        pool_endpoints({"spec": {"targetPorts": [{"number": 1}]}}, PODS, config)
    with pytest.raises(ConfigError, match=r"kubernetes\.pool"):
        pool_endpoints({"spec": {"selector": {"app": "vllm"}}}, PODS, config)
    with pytest.raises(ConfigError, match=r"kubernetes\.defaults"):
        pool_endpoints(POOL_V1, PODS, KubernetesConfig(pool="p", defaults={"max_model_len": 1}))


@pytest.mark.skipif(importlib.util.find_spec("kubernetes") is not None, reason="the kubernetes client is installed")
def test_without_the_kubernetes_client_the_error_says_what_to_install() -> None:
    with pytest.raises(ConfigError, match=r"kubernetes: .*pip install 'slosched\[kube\]'"):
        ClusterSource(KubernetesConfig(pool="p"))


def test_config_errors_name_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match=r"^endpoints: addresses must be unique"):
        parse_picker_config({"endpoints": [{"address": "1.2.3.4:80"}, {"address": "1.2.3.4:80"}]})
    with pytest.raises(ConfigError, match=r"^fallbacks:"):
        parse_picker_config({"fallbacks": -1})
    bad = tmp_path / "picker.yaml"
    bad.write_text("endpoints:\n  - address: 10.0.0.1:8000\n    max_concurrency: 0\n")
    assert run(["picker", "--config", str(bad), "--port", "0"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: endpoints.0.max_concurrency:")
    bad.write_text('{"endpoints": [], "policies": {"router": "nope"}}')
    assert run(["picker", "--config", str(bad)]) == 2
    assert "error: policies.router: unknown router 'nope'" in capsys.readouterr().err  # the path as written
    good = tmp_path / "good.yaml"
    good.write_text("endpoints:\n  - address: 10.0.0.1:8000\n")
    assert run(["picker", "--config", str(good), "--metrics-port", "70000"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == "error: --metrics-port: expected 0..65535, got 70000"
