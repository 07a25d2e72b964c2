"""Settings of ``slosched bench admission``: the stack under overload, with and without job-level admission.

Workloads (``--quick``: Text-to-SQL only): ``bench stack``'s Text-to-SQL (multi-stage CHESS workflows, where
an admitted job's later stages arrive as work nobody queued yet), relQueries and mixed multi-tenant workloads,
on their clusters and deadlines. Each runs the plain stack (``stack``: the stack without job-level admission,
``backlog: false``; the stack's default has it on) and its variants (``VARIANTS``):

- ``backlog``: the job layer judges a job at its arrival through the work queued on each instance
  (``critical-path.backlog``); ``(every stage)``: the same judgement at every stage (``backlog_stages``);
- ``reject``: every client asked for an early "cannot meet deadline", so a job the job layer finds hopeless
  is rejected instead of relegated (``simulator.on_infeasible``); and ``backlog`` with ``reject``;
- on the mixed workload (two tenants) also tenant classes: ``backlog`` with the engines serving the
  interactive tenant's band first, and with the job layer judging admission by band as well
  (``policies/job/bands.py``).

Loads are multiples of the plain stack's own steady-state SLO capacity @90%, measured in the same run on the
same seeds (``LOADS``); what counts is goodput (jobs meeting their deadline per second) at 2x and 3x against
goodput at 1x: the issue's "no collapse".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import slosched.bench.stack.setup as stack_setup
from slosched.bench.stack.setup import StackWorkload
from slosched.evaluation.workbench import Candidate, Workbench
from slosched.policies.fairness.spec import FairShareSpec
from slosched.policies.spec import PolicyParams

LOADS = (1.0, 2.0, 3.0)
QUICK_SEEDS = (1,)
FULL_SEEDS = (1, 2, 3)
WORKLOADS = (stack_setup.TEXT2SQL, stack_setup.RELQUERY, stack_setup.MIXED)
QUICK_WORKLOADS = (stack_setup.TEXT2SQL,)  # the one that collapses; mixed in the full run


# Tenant classes on the mixed workload: the tighter tenant in the lower band (served first), as an operator
# would give its interactive traffic priority over batch (``policies/job/bands.py``).
TENANT_BANDS = FairShareSpec(
    bands=tuple((name, float(band)) for band, (name, _) in enumerate(stack_setup.TENANT_SCALES))
)


@dataclass(frozen=True, slots=True)
class Variant:
    """The stack with or without each admission mechanism. ``bands``: the engines serve tenants by band
    (fair sharing's bands, ``TENANT_BANDS``) and, with ``band_admission``, the job layer judges each job by
    the work its band meets; such a variant runs only on a workload with several tenants."""

    label: str
    backlog: bool
    reject: bool
    bands: bool = False
    band_admission: bool = False
    backlog_stages: str = "arrival"

    def candidate(self) -> Candidate:
        stack = stack_setup.stack_candidates()[0]
        settings: dict[str, Any] = {"backlog": self.backlog}
        if self.backlog_stages != "arrival":
            settings["backlog_stages"] = self.backlog_stages
        if self.bands:
            settings["tenant_bands"] = self.band_admission
        params = PolicyParams(
            stack={stack_setup.STACK_POLICY: settings}, fair_share=TENANT_BANDS if self.bands else None
        )
        return replace(stack, label=self.label, params=params)

    def applies_to(self, workload: StackWorkload) -> bool:
        return not self.bands or len(workload.options.tenant_slo_scale) > 1

    def workbench(self, workload: StackWorkload, quick: bool) -> Workbench:
        bench = workload.workbench(quick)
        if not self.reject:
            return bench
        return replace(bench, options=replace(bench.options, on_infeasible="reject"))


PLAIN = Variant("stack", backlog=False, reject=False)
VARIANTS = (
    PLAIN,
    Variant("stack+backlog", backlog=True, reject=False),
    Variant("stack+backlog (every stage)", backlog=True, reject=False, backlog_stages="every"),
    Variant("stack+reject", backlog=False, reject=True),
    Variant("stack+backlog+reject", backlog=True, reject=True),
    Variant("stack+backlog+bands (engine)", backlog=True, reject=False, bands=True),
    Variant("stack+backlog+bands", backlog=True, reject=False, bands=True, band_admission=True),
)
