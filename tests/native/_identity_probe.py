"""Run in a child process by ``test_identity.py``: simulate small versions of the bundled scenarios under
their policies and the slosched stack, and print one JSON object: whether the compiled modules were
imported, and a digest of every run's records."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import slosched.sim.cluster
from slosched.experiment import compare_policies
from slosched.native import is_compiled
from slosched.scenario.config import load_scenario
from slosched.sim.runner import PolicyPair

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "examples").glob("*.yaml")) + sorted((ROOT / "src/slosched/bench/scenarios").glob("*.yaml"))
# Variants that take other paths through the simulator: stepping, stale router views, a lot of noise.
VARIANTS = {
    "": [],
    "stepping": ["simulator.fast_forward=false"],
    "stale-views": ["simulator.view_staleness_s=0.5", "simulator.noise_sigma=0.2"],
}


def digest(result: object) -> str:
    value = hashlib.sha256()
    for record in (*result.requests, *result.jobs):  # type: ignore[attr-defined]
        value.update(repr(dataclasses.astuple(record)).encode())
    for stats in result.instances:  # type: ignore[attr-defined]
        value.update(repr(dataclasses.astuple(stats)).encode())
    return value.hexdigest()


def main(quick: bool) -> None:
    """``quick``: the demo scenario only, without variants."""
    digests: dict[str, str] = {}
    for path in SCENARIOS:
        for variant, overrides in VARIANTS.items():
            if (quick and variant) or ((variant or quick) and path.stem != "demo"):
                continue
            scenario = load_scenario(path, [*overrides, "workload.num_jobs=100"])
            pairs = [*scenario.policy_pairs(), PolicyPair.parse("slosched")]
            for name, result in compare_policies(scenario, pairs, base_dir=path.parent).items():
                digests[f"{path.name}{'/' + variant if variant else ''}:{name}"] = digest(result)
    print(json.dumps({"compiled": is_compiled(slosched.sim.cluster), "digests": digests}))


if __name__ == "__main__":
    main(quick=sys.argv[1:] == ["quick"])
