"""Stacks: one name that sets the router, the engine and the job policy together (DESIGN 4.5).

``slosched`` is accepted wherever a ``ROUTER+ENGINE`` pair is (``compare --policies``, a scenario's
``policies:``, the gateway's config, ``slosched up``); the vLLM plugin takes its engine preset of the same
name. A stack's parameters live in one block, ``policy_params: {stack: {slosched: {...}}}``; each key
belongs to one layer and is handed to that layer's factory (``split_params``), and an unknown key fails
naming the allowed ones.

``slosched`` = router ``slosched`` (least predicted completion per instance, each instance's own step-time
belief, prefix-cache affinity; ``policies/cluster/completion.py``) + engine preset ``slosched``
(deadline-first ordering with best-effort triage, chunked prefill; ``policies/engine/stack_presets.py``) +
job policy ``slosched`` (a job's deadline apportioned to its calls along the workflow's expected critical
path; ``policies/job/critical_path.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slosched.core.errors import ConfigError
from slosched.policies.cluster.completion import ROUTER_PARAMS
from slosched.policies.engine.stack_presets import ENGINE_PARAMS
from slosched.policies.job.critical_path import JOB_PARAMS


@dataclass(slots=True, frozen=True)
class StackSpec:
    """The three registry names a stack sets, and which parameter keys go to which layer."""

    name: str
    router: str
    engine: str
    job: str
    router_keys: frozenset[str] = frozenset()
    engine_keys: frozenset[str] = frozenset()
    job_keys: frozenset[str] = frozenset()

    def split_params(self, params: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(router, engine, job) parameters of the stack's one block; unknown keys fail."""
        given = dict(params or {})
        allowed = self.router_keys | self.engine_keys | self.job_keys
        unknown = set(given) - allowed
        if unknown:
            raise ConfigError(
                f"policy_params.stack.{self.name}", f"unknown {sorted(unknown)}; allowed: {sorted(allowed) or '(none)'}"
            )

        def part(keys: frozenset[str]) -> dict[str, Any]:
            return {key: value for key, value in given.items() if key in keys}

        return part(self.router_keys), part(self.engine_keys), part(self.job_keys)


STACKS: Mapping[str, StackSpec] = {
    "slosched": StackSpec(
        name="slosched",
        router="slosched",
        engine="slosched",
        job="slosched",
        router_keys=frozenset(ROUTER_PARAMS),
        engine_keys=ENGINE_PARAMS,
        job_keys=JOB_PARAMS,
    ),
}


def stack_names() -> list[str]:
    return sorted(STACKS)
