"""Endpoints from Kubernetes: an ``InferencePool`` (GIE) and the pods its selector matches.

The mapping (``pool_endpoints``) is pure: plain dicts in the API's JSON shape (what ``kubectl get -o json``
prints), so tests need no cluster. Both published InferencePool shapes are read: ``inference.networking.k8s.io/v1``
(``spec.selector.matchLabels``, ``spec.targetPorts[0].number``) and ``inference.networking.x-k8s.io/v1alpha2``
(``spec.selector`` as a flat label map, ``spec.targetPortNumber``). A pod is an endpoint when its labels
match, it has an IP, its ``Ready`` condition is true and it is not being deleted; its model and GPU come from
its labels (``kubernetes.model_label``, ``gpu_label``), anything else from ``kubernetes.defaults``.

The cluster side (``ClusterSource``) uses the ``kubernetes`` client when it is installed (``pip install
'slosched[kube]'``) and its config (in-cluster service account first, then ``~/.kube/config``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from slosched.core.errors import ConfigError
from slosched.picker.config import EndpointConfig, KubernetesConfig

# (group, version) of the InferencePool resource, newest first.
POOL_VERSIONS = (("inference.networking.k8s.io", "v1"), ("inference.networking.x-k8s.io", "v1alpha2"))


def pool_selector(pool: Mapping[str, Any]) -> dict[str, str]:
    """The pool's pod labels (v1: ``matchLabels``; v1alpha2: the selector itself)."""
    selector = pool.get("spec", {}).get("selector") or {}
    labels = selector.get("matchLabels", selector) if isinstance(selector, dict) else {}
    if not labels:
        raise ConfigError("kubernetes.pool", "the InferencePool selects no pods (empty selector)")
    return {str(key): str(value) for key, value in labels.items()}


def pool_port(pool: Mapping[str, Any]) -> int:
    """The model servers' port (v1: ``targetPorts[0].number``; v1alpha2: ``targetPortNumber``)."""
    spec = pool.get("spec", {})
    ports = spec.get("targetPorts")
    if ports:
        return int(ports[0]["number"])
    if "targetPortNumber" in spec:
        return int(spec["targetPortNumber"])
    raise ConfigError("kubernetes.pool", "the InferencePool names no target port")


def pod_ready(pod: Mapping[str, Any]) -> bool:
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    status = pod.get("status", {})
    conditions = status.get("conditions") or []
    return bool(status.get("podIP")) and any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pool_endpoints(
    pool: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], config: KubernetesConfig
) -> list[EndpointConfig]:
    """The pool's ready pods as endpoints, ordered by address (a stable order keeps unchanged slots in place)."""
    selector, port = pool_selector(pool), pool_port(pool)
    endpoints: dict[str, EndpointConfig] = {}
    for pod in pods:
        labels = pod.get("metadata", {}).get("labels") or {}
        if any(labels.get(key) != value for key, value in selector.items()) or not pod_ready(pod):
            continue
        fields = dict(config.defaults)
        for field, label in (("model", config.model_label), ("gpu", config.gpu_label)):
            if label in labels:
                fields[field] = labels[label]
        address = f"{pod['status']['podIP']}:{port}"
        try:
            endpoints[address] = EndpointConfig(address=address, **fields)
        except (ValidationError, TypeError) as error:
            name = pod.get("metadata", {}).get("name", address)
            raise ConfigError("kubernetes.defaults", f"pod {name}: {str(error).splitlines()[0][:120]}") from error
    return [endpoints[address] for address in sorted(endpoints)]


class ClusterSource:
    """Reads the pool and its pods with the ``kubernetes`` client (blocking calls, run in a thread)."""

    def __init__(self, config: KubernetesConfig) -> None:
        try:
            from kubernetes import client  # type: ignore[import-not-found]
            from kubernetes import config as kube_config
        except ImportError:
            raise ConfigError(
                "kubernetes", "endpoints from an InferencePool need the kubernetes client: pip install 'slosched[kube]'"
            ) from None
        try:
            kube_config.load_incluster_config()
        except kube_config.ConfigException:
            try:
                kube_config.load_kube_config()
            except (kube_config.ConfigException, OSError) as error:
                raise ConfigError("kubernetes", f"no cluster credentials: {error}") from None
        self.config = config
        self._api = client.ApiClient()
        self._core = client.CoreV1Api(self._api)
        self._custom = client.CustomObjectsApi(self._api)

    def _pool(self) -> dict[str, Any]:
        last: Exception | None = None
        for group, version in POOL_VERSIONS:
            try:
                found: dict[str, Any] = self._custom.get_namespaced_custom_object(
                    group, version, self.config.namespace, "inferencepools", self.config.pool
                )
                return found
            except Exception as error:  # the API's 404 for a version the cluster does not serve: try the next
                last = error
        raise ConfigError("kubernetes.pool", f"InferencePool {self.config.namespace}/{self.config.pool}: {last}")

    def read(self) -> list[EndpointConfig]:
        pool = self._pool()
        selector = ",".join(f"{key}={value}" for key, value in pool_selector(pool).items())
        pods = self._core.list_namespaced_pod(self.config.namespace, label_selector=selector)
        as_json = self._api.sanitize_for_serialization(pods)
        return pool_endpoints(pool, as_json.get("items", []), self.config)

    async def aread(self) -> list[EndpointConfig]:
        return await asyncio.to_thread(self.read)
