"""Simulator knobs (validated by the scenario loader)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.numbers import as_float, plain_numbers

ON_INFEASIBLE = ("relegate", "reject")
# The output-length predictor the policies share (``perf/output_length.py``'s modes): the key's mean, or
# the mean of its calls of similar prompt length (``bucket``).
OUTPUT_PREDICTORS = ("mean", "bucket")
INFEASIBLE_REASON = "deadline_infeasible"  # the rejection reason of a job rejected as infeasible
_FLOAT_FIELDS = (
    "noise_sigma",
    "view_staleness_s",
    "belief_refit_s",
    "slo_s",
    "slo_scale",
    "horizon_s",
    "sample_interval_s",
)


@dataclass(slots=True, frozen=True)
class SimOptions:
    """``slo_s`` (fixed) or ``slo_scale`` give the SLO of jobs whose trace does not carry one; neither means
    no deadline. ``slo_scale`` multiplies a no-contention latency on the fastest instance: with ``slo_basis``
    ``estimated`` (the default) the one a client can estimate at submission (``sim/deadlines.py``), with
    ``true-lengths`` the one from the job's true output lengths (an ORACLE deadline: policies reading it
    learn true sizes; kept only to reproduce earlier results, and labelled).

    ``tenant_slo_scale``: ``(tenant, scale)`` pairs; a job of a listed tenant gets that tenant's scale instead of
    ``slo_scale`` (tenants of different SLO tightness on one cluster); a job's own ``slo_s`` still wins.

    ``fast_forward`` False steps every iteration (the reference the fast path is tested against).
    ``view_staleness_s`` 0 gives routers fresh instance state on every decision.
    ``sample_interval_s``: how often each instance's queues, KV use and busy time are sampled into
    ``RunResult.series`` (read-only, so results do not depend on it); None picks one from the arrival
    span (about 500 samples), 0 turns sampling off.

    ``on_infeasible``: what becomes of a job its job policy decides can no longer meet its deadline
    (``StageDecision.best_effort``): ``relegate`` (served as best effort, after every call that can still
    count) or ``reject`` (its clients asked for an early "cannot meet deadline": the job ends ``rejected``
    at that decision, its calls never routed; the gateway's ``x-job-if-infeasible: reject``).

    ``output_predictor``: how the policies' shared output-length belief learns (``OUTPUT_PREDICTORS``): each
    template and stage's mean (``mean``), or refined by prompt length (``bucket``, ``perf/output_length.py``).
    """

    noise_sigma: float = 0.05
    view_staleness_s: float = 0.0
    fast_forward: bool = True
    belief_refit_s: float = 2.0
    slo_s: float | None = None
    slo_scale: float | None = None
    slo_basis: str = "estimated"
    horizon_s: float = math.inf
    # Last, so positional construction of the fields above keeps its meaning.
    tenant_slo_scale: tuple[tuple[str, float], ...] = ()
    sample_interval_s: float | None = None
    # The instances whose fastest one ``slo_scale`` refers to (empty: the run's own cluster). Fleet search
    # (``planning/fleet.py``) compares clusters of different GPUs under one SLO: the scenario's own cluster's,
    # so a fleet of slow GPUs is not judged against deadlines its own slowness loosened.
    slo_reference: tuple[InstanceSpec, ...] = ()
    on_infeasible: str = "relegate"
    output_predictor: str = "mean"

    def __post_init__(self) -> None:
        if self.on_infeasible not in ON_INFEASIBLE:
            raise ConfigError("simulator.on_infeasible", f"got {self.on_infeasible!r}; allowed: {list(ON_INFEASIBLE)}")
        if self.output_predictor not in OUTPUT_PREDICTORS:
            allowed = list(OUTPUT_PREDICTORS)
            raise ConfigError("simulator.output_predictor", f"got {self.output_predictor!r}; allowed: {allowed}")
        # Plain floats: the compiled simulator (slosched.native) rejects numpy numbers the sources accept.
        plain_numbers(self, (), _FLOAT_FIELDS)
        scales = tuple((name, as_float(scale, "SimOptions.tenant_slo_scale")) for name, scale in self.tenant_slo_scale)
        object.__setattr__(self, "tenant_slo_scale", scales)

    def scale_of(self, tenant: str) -> float | None:
        """The SLO scale of ``tenant``'s jobs: its listed scale, else ``slo_scale``."""
        for name, scale in self.tenant_slo_scale:
            if name == tenant:
                return scale
        return self.slo_scale

    @property
    def scales_deadlines(self) -> bool:
        """True when some job may get a scaled deadline (so the deadline model must be learned)."""
        return self.slo_scale is not None or bool(self.tenant_slo_scale)
