"""Engine-layer policy protocols: ordering, admission and batch forming, combined into an EnginePolicy.

The engine mechanism (the simulator's scheduler, the gateway's per-instance queue, the vLLM plugin) owns the
queues and the KV cache; these parts only decide. ``time_invariant`` parts promise that their decisions
change only when the engine's queues change, not with time alone; that lets the simulator advance runs of
identical decode steps in closed form even while requests wait (they stay blocked until something finishes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from slosched.core.views import EngineView, SeqView, StepObservation, StepPlan
from slosched.policies.fairness.share import FairShare
from slosched.policies.registry import Registry


class OrderingPolicy(Protocol):
    """Which waiting request goes first: the lowest ``key``. ``static_keys``: a key never changes while the
    request waits, so the mechanism may keep the queue sorted on insertion instead of every step."""

    static_keys: bool
    time_invariant: bool

    def key(self, seq: SeqView, engine: EngineView) -> Any: ...


class AdmissionPolicy(Protocol):
    """May this waiting request join the running batch now? Deferred requests stay queued."""

    time_invariant: bool

    def admit(self, seq: SeqView, engine: EngineView) -> bool: ...


class BatchPolicy(Protocol):
    """The shape of the next step: mode, token budget, running-request cap."""

    time_invariant: bool

    def plan(self, engine: EngineView) -> StepPlan: ...


@runtime_checkable
class StepObserver(Protocol):
    def observe_step(self, observation: StepObservation) -> None: ...


@runtime_checkable
class StateExporter(Protocol):
    def export_state(self, engine: EngineView) -> Mapping[str, float]: ...


@dataclass(slots=True)
class EnginePolicy:
    """A named (ordering, admission, batching) triple; presets are registered in ENGINE_PRESETS.
    ``fair_share``: when set, slots go to waiting requests by band, tenant weight and age first, in the
    ordering's order within a tenant (``policies/fairness/share.py``); None keeps the ordering alone."""

    name: str
    ordering: OrderingPolicy
    admission: AdmissionPolicy
    batching: BatchPolicy
    observers: list[StepObserver] = field(default_factory=list)
    fair_share: FairShare | None = None

    def __post_init__(self) -> None:
        for part in (self.ordering, self.admission, self.batching):
            if isinstance(part, StepObserver) and part not in self.observers:
                self.observers.append(part)

    @property
    def time_invariant(self) -> bool:
        return self.ordering.time_invariant and self.admission.time_invariant and self.batching.time_invariant

    def export_state(self, engine: EngineView) -> Mapping[str, float]:
        exported: dict[str, float] = {}
        for part in (self.ordering, self.admission, self.batching):
            # What ``isinstance(part, StateExporter)`` checks (the method is there), without the protocol
            # machinery: routers read this on every routing decision, and the protocol check alone was a
            # fifth of a stack run's time.
            export = getattr(part, "export_state", None)
            if export is not None:
                exported.update(export(engine))
        return exported


ORDERINGS: Registry[OrderingPolicy] = Registry("engine ordering")
ADMISSIONS: Registry[AdmissionPolicy] = Registry("engine admission")
BATCHINGS: Registry[BatchPolicy] = Registry("engine batching")
ENGINE_PRESETS: Registry[EnginePolicy] = Registry("engine policy")
