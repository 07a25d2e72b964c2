"""Router-facing instance snapshots, refreshed with configurable staleness (like scraped metrics)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from slosched.core.belief import StepPredictor
from slosched.core.instance import InstanceSpec
from slosched.core.request import Request

if TYPE_CHECKING:
    from slosched.sim.instance import SimInstance


@dataclass(slots=True)
class InstanceSnapshot:
    """Implements ``core.views.InstanceView``. Between refreshes the cluster adds what it routed here,
    the way a gateway keeps its own in-flight accounting on top of scraped engine metrics."""

    index: int
    spec: InstanceSpec
    snapshot_s: float
    num_running: int
    num_waiting: int
    waiting_prefill_tokens: int
    outstanding_decode_tokens: float
    num_free_kv_blocks: int
    num_kv_blocks: int
    step_predictor: StepPredictor
    waiting_requests: list[Request] = field(default_factory=list)
    exported: Mapping[str, float] = field(default_factory=dict)
    instance: SimInstance | None = None

    def cached_prefix_tokens(self, request: Request) -> int:
        if self.instance is None:
            return 0
        return self.instance.cached_prefix_tokens(request)

    def note_routed(self, request: Request) -> None:
        self.waiting_requests.append(request)
        self.num_waiting += 1
        self.waiting_prefill_tokens += request.prompt_tokens
        self.outstanding_decode_tokens += max(request.predicted_output_tokens, 1.0)


def take_snapshot(instance: SimInstance, has_exporters: bool) -> InstanceSnapshot:
    instance.sync()
    exported = instance.engine.export_state(instance) if has_exporters else {}
    return InstanceSnapshot(
        index=instance.index,
        spec=instance.spec,
        snapshot_s=instance.kernel.now_s,
        num_running=instance.num_running,
        num_waiting=len(instance.waiting),
        waiting_prefill_tokens=instance.waiting_prefill_tokens,
        outstanding_decode_tokens=instance.outstanding_decode_tokens,
        num_free_kv_blocks=instance.kv.num_free,
        num_kv_blocks=instance.kv.num_blocks,
        step_predictor=instance.belief.predictor,
        waiting_requests=instance.waiting_requests,
        exported=exported,
        instance=instance,
    )
