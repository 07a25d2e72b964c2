"""YAML, JSON and TOML blocks, checked as what they are.

A YAML block's kind comes from its top-level keys: the kinds (scenario, gateway config, picker config,
hardware file) whose models have every key it uses; when several do, an annotation names it. A block with
the keys a whole file needs (a scenario's ``cluster`` and ``workload``, a gateway's ``backends``) is checked
alone; a fragment (``policies:``, ``tenants:``, ...) is merged over a base file first. Checks go through the
loaders the product uses, so an unknown key or policy name fails here as it would for a user.
"""

from __future__ import annotations

import copy
import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from slosched.gateway.ops.config import GatewayConfig, parse_config
from slosched.perf.hardware import load_hardware
from slosched.perf.hardware_file import HardwareFile
from slosched.picker.config import PickerConfig, parse_picker_config
from slosched.policies.registry import ENTRY_POINT_GROUP
from slosched.scenario.config import Scenario, parse_scenario
from tests.docs.blocks import REPO, YAML_KINDS, BlockError, DocBlock

KIND_KEYS: dict[str, frozenset[str]] = {
    "scenario": frozenset(Scenario.model_fields),
    "gateway": frozenset(GatewayConfig.model_fields),
    "picker": frozenset(PickerConfig.model_fields),
    "hardware": frozenset(HardwareFile.model_fields),
}
assert set(KIND_KEYS) == set(YAML_KINDS)
# What a fragment is merged over: the demo scenario, a gateway with one backend.
BASE_SCENARIO = REPO / "examples" / "demo.yaml"
BASE_GATEWAY = {"backends": [{"name": "b0", "url": "http://127.0.0.1:8001", "model": "tiny"}], "job_store": "memory://"}


def yaml_kind(block: DocBlock, data: Mapping[str, Any]) -> str:
    """The block's kind: its annotation, else the one kind whose keys cover the block's."""
    if block.annotation is not None and block.annotation.kind in YAML_KINDS:
        return block.annotation.kind
    kinds = [kind for kind, keys in KIND_KEYS.items() if set(data) <= keys]
    if len(kinds) != 1:
        what = f"could be any of {kinds}" if kinds else "fits no kind"
        raise BlockError(
            f"{block.id}: a YAML block with keys {sorted(data)} {what}; name its kind with "
            f"<!-- docs-test: {' | '.join(YAML_KINDS)} --> right before it"
        )
    return kinds[0]


def merged(base: Mapping[str, Any], fragment: Mapping[str, Any]) -> dict[str, Any]:
    """``fragment`` over ``base``: mappings merged key by key, anything else replaced."""
    result = copy.deepcopy(dict(base))
    for key, value in fragment.items():
        old = result.get(key)
        result[key] = merged(old, value) if isinstance(old, Mapping) and isinstance(value, Mapping) else value
    return result


def check_yaml(block: DocBlock, workdir: Path) -> str:
    """Validate the block; returns what it was checked as (``gateway fragment``, ...). Files it names
    (profiles, hardware files) resolve against ``workdir``."""
    data = yaml.safe_load(block.text)
    if not isinstance(data, dict):
        raise BlockError(f"{block.id}: a YAML block holds a mapping, got {type(data).__name__}")
    kind = yaml_kind(block, data)
    whole = {"scenario": {"cluster", "workload"}, "gateway": {"backends"}}.get(kind, set())
    fragment = not whole <= set(data)
    if kind == "scenario":
        base = yaml.safe_load(BASE_SCENARIO.read_text()) if fragment else {}
        parse_scenario(merged(base, data), block.id, base_dir=workdir, check_generator=True)
    elif kind == "gateway":
        parse_config(merged(BASE_GATEWAY, data) if fragment else data, block.id)
    elif kind == "picker":
        parse_picker_config(data, block.id)
    else:
        path = workdir / f"hardware-{block.line}.yaml"
        path.write_text(block.text)
        load_hardware([path])
    return f"{kind} fragment" if fragment else kind


def check_json(block: DocBlock) -> str:
    json.loads(block.text)
    return "JSON parsed"


def check_toml(block: DocBlock) -> str:
    """TOML parses; an entry-point group of a package's pyproject.toml is the one slosched loads."""
    data = tomllib.loads(block.text)
    groups = data.get("project", {}).get("entry-points", {})
    unknown = [group for group in groups if group.startswith("slosched") and group != ENTRY_POINT_GROUP]
    assert not unknown, f"entry-point groups {unknown}: slosched loads {ENTRY_POINT_GROUP!r}"
    return "TOML parsed"
