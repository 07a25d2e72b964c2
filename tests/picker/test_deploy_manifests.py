"""docs/deploy/*.yaml, checked offline: every document parses, has a known kind and apiVersion and a name, and
the names one manifest references in another (services, labels, ports, config maps, secrets, the pool) match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from slosched.gateway.ops.config import parse_config
from slosched.picker.config import parse_picker_config

DEPLOY = Path(__file__).resolve().parents[2] / "docs" / "deploy"
KINDS = {
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Service"),
    ("v1", "ServiceAccount"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("inference.networking.k8s.io/v1", "InferencePool"),
    ("gateway.networking.k8s.io/v1", "Gateway"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
}


def _documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        docs += [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    return docs


DOCS = _documents()
BY = {(doc["kind"], doc["metadata"]["name"]): doc for doc in DOCS}


def one(kind: str, name: str) -> dict[str, Any]:
    assert (kind, name) in BY, f"{kind} {name} is referenced but not defined"
    return BY[(kind, name)]


def workloads() -> list[dict[str, Any]]:
    return [doc for doc in DOCS if doc["kind"] in ("Deployment", "StatefulSet")]


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}")
def test_every_document_has_a_known_kind_and_a_name(doc: dict[str, Any]) -> None:
    assert (doc.get("apiVersion"), doc.get("kind")) in KINDS
    assert doc["metadata"]["name"]
    assert len([d for d in DOCS if (d["kind"], d["metadata"]["name"]) == (doc["kind"], doc["metadata"]["name"])]) == 1


def test_workloads_select_their_own_pods_and_reference_existing_objects() -> None:
    for work in workloads():
        pod = work["spec"]["template"]
        assert _matches(work["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"])
        spec = pod["spec"]
        if "serviceAccountName" in spec:
            one("ServiceAccount", spec["serviceAccountName"])
        for volume in spec.get("volumes", []):
            one("ConfigMap", volume["configMap"]["name"])
        for container in spec["containers"]:
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref is not None:
                    assert ref["key"] in one("Secret", ref["name"])["stringData"]
    for work in BY.values():
        if work["kind"] == "StatefulSet":
            one("Service", work["spec"]["serviceName"])


def test_every_service_selects_pods_that_listen_on_its_target_port() -> None:
    for service in (doc for doc in DOCS if doc["kind"] == "Service"):
        pods = [
            w["spec"]["template"]
            for w in workloads()
            if _matches(service["spec"]["selector"], w["spec"]["template"]["metadata"]["labels"])
        ]
        assert pods, f"Service {service['metadata']['name']} selects no pods"
        ports = {p["containerPort"] for pod in pods for c in pod["spec"]["containers"] for p in c["ports"]}
        assert {port["targetPort"] for port in service["spec"]["ports"]} <= ports


def test_the_inference_pool_its_picker_route_and_rbac_fit_together() -> None:
    pool = one("InferencePool", "vllm-llama")
    picker_service = one("Service", pool["spec"]["endpointPickerRef"]["name"])
    assert pool["spec"]["endpointPickerRef"]["port"]["number"] in {p["port"] for p in picker_service["spec"]["ports"]}
    selected = [
        w
        for w in workloads()
        if _matches(pool["spec"]["selector"]["matchLabels"], w["spec"]["template"]["metadata"]["labels"])
    ]
    assert selected and all(
        pool["spec"]["targetPorts"][0]["number"] in {p["containerPort"] for p in c["ports"]}
        for w in selected
        for c in w["spec"]["template"]["spec"]["containers"]
    )
    route = one("HTTPRoute", "llm-route")
    for rule in route["spec"]["rules"]:
        for ref in rule["backendRefs"]:
            assert (ref["group"], ref["kind"]) == ("inference.networking.k8s.io", "InferencePool")
            one("InferencePool", ref["name"])
    for parent in route["spec"]["parentRefs"]:
        one("Gateway", parent["name"])
    binding = one("RoleBinding", "slosched-picker")
    one("Role", binding["roleRef"]["name"])
    for subject in binding["subjects"]:
        one("ServiceAccount", subject["name"])


def test_the_configs_in_the_config_maps_load_and_name_what_the_manifests_define() -> None:
    picker = parse_picker_config(yaml.safe_load(one("ConfigMap", "slosched-picker-config")["data"]["picker.yaml"]))
    assert picker.kubernetes is not None
    pool = one("InferencePool", picker.kubernetes.pool)
    assert picker.port == pool["spec"]["endpointPickerRef"]["port"]["number"]
    deployment = one("Deployment", "slosched-picker")["spec"]["template"]["spec"]
    args = deployment["containers"][0]["args"]
    assert args[:2] == ["slosched", "picker"] and args[args.index("--port") + 1] == str(picker.port)
    mount = deployment["containers"][0]["volumeMounts"][0]["mountPath"]
    assert args[args.index("--config") + 1] == f"{mount}/picker.yaml"
    vllm = one("StatefulSet", "vllm-llama")
    assert picker.kubernetes.model_label in vllm["spec"]["template"]["metadata"]["labels"]
    gateway = parse_config(yaml.safe_load(one("ConfigMap", "slosched-gateway-config")["data"]["gateway.yaml"]))
    hosts = {
        f"{vllm['metadata']['name']}-{i}.{vllm['spec']['serviceName']}:8000" for i in range(vllm["spec"]["replicas"])
    }
    assert {backend.url.removeprefix("http://") for backend in gateway.backends} == hosts
    args = one("Deployment", "slosched-gateway")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["slosched", "serve"] and args[2].endswith("/gateway.yaml")
