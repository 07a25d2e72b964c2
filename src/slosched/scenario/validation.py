"""Every problem of a scenario at once (``core/problems.py``): ``ScenarioError`` lists them.

``policy_params`` is a free mapping to pydantic, so its names are checked here against the registries,
and each parameter name against what that policy accepts (``policies/param_problems.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slosched.core.problems import ConfigProblems, Problem, unknown_message
from slosched.policies.param_problems import check_engine, check_keys, check_named, pipeline_problems


class ScenarioError(ConfigProblems):
    """All problems of one scenario; ``str`` has one ``field: message`` line per problem."""


def policy_param_problems(data: Mapping[str, Any]) -> list[Problem]:
    """Unknown policy names and parameter names in ``policy_params`` (shapes are pydantic's to check)."""
    from slosched.policies.stacks.base import STACKS

    params = data.get("policy_params")
    if not isinstance(params, Mapping):
        return []
    problems: list[Problem] = []
    sections = {"router": "routers", "job": "job_policies"}
    for section, block in params.items():
        if not isinstance(block, Mapping):
            continue
        for name, given in block.items():
            field = f"policy_params.{section}.{name}"
            if not isinstance(given, Mapping):
                continue  # pydantic reports the type
            if section in sections:
                problems += check_named(field, sections[section], str(name), given)
                if section == "router" and name == "pipeline":
                    problems += pipeline_problems(field, given)  # its stages, as the gateway's check does
            elif section == "engine":
                problems += check_engine(field, str(name), given)
            elif section == "stack":
                stack = STACKS.get(str(name))
                if stack is None:
                    problems.append(Problem(field, unknown_message("stack", name, STACKS, "known names")))
                    continue
                keys = stack.router_keys | stack.engine_keys | stack.job_keys
                problems += check_keys(field, f"stack {name!r}", given, sorted(keys))
    return problems
