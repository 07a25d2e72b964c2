"""The JSON Schema of a scenario file, for editor completion (``slosched schema``).

pydantic's schema of ``Scenario`` with the names it cannot see filled in from the registries: policy
pairs and stacks, job policies, each policy's parameter names under ``policy_params``, the arrival
processes, GPUs, models, engine stacks and workload generators. ``docs/scenario.schema.json`` is this
output; a test keeps it current.
"""

from __future__ import annotations

import json
import re
from typing import Any

from slosched.policies.catalog import param_names, registries
from slosched.policies.engine.spec import PARTS
from slosched.scenario.config import Scenario
from slosched.workloads.arrivals import ArrivalSpec

SCHEMA_ID = "https://slosched.dev/scenario.schema.json"


def scenario_schema() -> dict[str, Any]:
    schema = Scenario.model_json_schema()
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}
    defs = schema["$defs"]
    props = schema["properties"]
    names = {section: registry.names() for section, registry in registries().items()}
    props["policies"]["items"] = _policy_text(names)
    props["job_policy"]["enum"] = names["job_policies"]
    defs["PolicyParamsConfig"]["properties"] = _policy_params(names)
    arrival = ArrivalSpec.model_json_schema()
    defs["ArrivalSpec"] = arrival
    defs["WorkloadConfig"]["properties"]["arrival"] = {"$ref": "#/$defs/ArrivalSpec"}
    _hardware_enums(defs)
    return schema


def schema_text() -> str:
    """The schema as the command prints it and the docs file holds it (stable key order, newline)."""
    return json.dumps(scenario_schema(), indent=2, sort_keys=True) + "\n"


def _alternatives(values: list[str]) -> str:
    return "|".join(re.escape(value) for value in values)


def _policy_text(names: dict[str, list[str]]) -> dict[str, Any]:
    from slosched.policies.stacks.base import stack_names

    pairs = [f"{router}+{engine}" for router in names["routers"] for engine in names["engine_presets"]]
    parts = "/".join(f"({_alternatives(names[f'{part}s'])})" for part in PARTS)
    pattern = f"^({_alternatives(names['routers'])})\\+{parts}$"
    return {
        "description": "ROUTER+ENGINE (an engine is a preset or ORDERING/ADMISSION/BATCHING), or a stack",
        "anyOf": [{"enum": [*stack_names(), *pairs]}, {"type": "string", "pattern": pattern}],
    }


def _params_of(section: str, name: str) -> dict[str, Any]:
    allowed = param_names(section, name)
    if allowed is None:
        return {"type": "object"}
    return {"type": "object", "properties": {key: {} for key in allowed}, "additionalProperties": False}


def _policy_params(names: dict[str, list[str]]) -> dict[str, Any]:
    from slosched.policies.stacks.base import STACKS

    def block(section: str) -> dict[str, Any]:
        properties = {name: _params_of(section, name) for name in names[section]}
        return {"type": "object", "properties": properties, "additionalProperties": False}

    engine = block("engine_presets")
    per_part = {part: {"type": "object"} for part in PARTS}
    parts_key = "^[^/]+/[^/]+/[^/]+$"
    engine["patternProperties"] = {parts_key: {"type": "object", "properties": per_part, "additionalProperties": False}}
    stacks = {
        name: {
            "type": "object",
            "properties": {key: {} for key in sorted(stack.router_keys | stack.engine_keys | stack.job_keys)},
            "additionalProperties": False,
        }
        for name, stack in STACKS.items()
    }
    return {
        "router": block("routers"),
        "engine": engine,
        "job": block("job_policies"),
        "stack": {"type": "object", "properties": stacks, "additionalProperties": False},
    }


def _hardware_enums(defs: dict[str, Any]) -> None:
    from slosched.perf.hardware import GPU_ALIASES, gpu_names, model_names
    from slosched.perf.roofline import CALIBRATION
    from slosched.workloads.generators import generator_names

    group = defs["InstanceGroup"]["properties"]
    group["gpu"]["enum"] = sorted({*gpu_names(), *GPU_ALIASES})
    group["model"]["enum"] = model_names()
    group["stack"]["enum"] = sorted(CALIBRATION.stacks)
    generator = defs["WorkloadConfig"]["properties"]["generator"]
    generator["anyOf"] = [{"enum": generator_names()}, {"type": "null"}]
