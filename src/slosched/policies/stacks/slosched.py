"""Stack ``slosched``: the three layers this project contributes, under one name.

- router ``deadline-completion`` (``cluster/routers/deadline_completion.py``): least predicted completion
  against each call's target, per instance's own step-time belief, with prefix-cache affinity;
- engine preset ``deadline-triage`` (``engine/presets/deadline_triage.py``): deadline-first ordering with
  best-effort triage, step token budget sized to the tightest running call;
- job policy ``critical-path`` (``job/critical_path.py``): a job's deadline apportioned to its calls along
  the workflow's expected critical path, hopeless jobs demoted.

Each part was also registered as ``slosched`` (kept as aliases, ``registry.ALIASES``).
"""

from __future__ import annotations

from slosched.policies.stacks.base import STACKS, StackSpec


@STACKS.register("slosched")
def slosched() -> StackSpec:
    return StackSpec(name="slosched", router="deadline-completion", engine="deadline-triage", job="critical-path")
