"""Views: the narrow, read-only state policies may see (protocols).

The simulator, the gateway and the vLLM plugin each adapt their own state to these protocols, which is
what lets one policy object run in all three runtimes. Nothing here exposes ground truth (the true output
length) or the wall clock: time is ``now_s`` of the view.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

# StepObservation lives with the belief protocols that consume it; re-exported for the views' users.
from slosched.core.belief import StepObservation as StepObservation
from slosched.core.belief import StepPredictor
from slosched.core.deadline import absolute_deadline_s, slo_or_inf
from slosched.core.instance import InstanceSpec
from slosched.core.request import Request


class SeqView(Protocol):
    """Engine-side progress of one request on one instance."""

    @property
    def request(self) -> Request: ...
    @property
    def num_prompt_tokens(self) -> int:
        """Tokens that must be prefilled (prompt, plus generated tokens after a recompute preemption)."""
        ...

    @property
    def num_computed_tokens(self) -> int: ...
    @property
    def num_output_tokens(self) -> int: ...
    @property
    def enqueue_s(self) -> float: ...
    @property
    def first_token_s(self) -> float | None: ...
    @property
    def num_preemptions(self) -> int: ...


class EngineView(Protocol):
    """What engine-layer policies (ordering, admission, batch forming) see of their instance."""

    @property
    def now_s(self) -> float: ...
    @property
    def spec(self) -> InstanceSpec: ...
    @property
    def num_running(self) -> int: ...
    @property
    def running_seqs(self) -> Sequence[SeqView]:
        """Running requests with current progress (may cost O(batch) to produce; prefer num_running)."""
        ...

    @property
    def waiting(self) -> Sequence[SeqView]: ...
    @property
    def num_free_kv_blocks(self) -> int: ...
    @property
    def num_kv_blocks(self) -> int: ...
    @property
    def step_predictor(self) -> StepPredictor: ...
    def cached_prefix_tokens(self, request: Request) -> int:
        """Prompt tokens of ``request`` the prefix cache holds now (read-only lookup)."""
        ...


class InstanceView(Protocol):
    """What cluster-layer routers see of one instance, refreshed with the runtime's staleness."""

    @property
    def index(self) -> int: ...
    @property
    def spec(self) -> InstanceSpec: ...
    @property
    def snapshot_s(self) -> float: ...
    @property
    def num_running(self) -> int: ...
    @property
    def num_waiting(self) -> int: ...
    @property
    def waiting_prefill_tokens(self) -> int: ...
    @property
    def waiting_requests(self) -> Sequence[Request]:
        """Requests queued (not yet admitted) at the instance, in its queue order."""
        ...

    @property
    def outstanding_decode_tokens(self) -> float:
        """Predicted output tokens still to generate by requests on this instance (belief)."""
        ...

    @property
    def num_free_kv_blocks(self) -> int: ...
    @property
    def num_kv_blocks(self) -> int: ...
    @property
    def step_predictor(self) -> StepPredictor: ...
    @property
    def exported(self) -> Mapping[str, float]:
        """Forward-looking state the engine policy exports (e.g. predicted batch latency)."""
        ...

    def cached_prefix_tokens(self, request: Request) -> int: ...


class StepMode(StrEnum):
    """How one engine step mixes prefill and decode work."""

    MIXED = "mixed"  # decodes first, then prefill chunks in the remaining budget (vLLM v1, Sarathi)
    PREFILL_FIRST = "prefill_first"  # a prefill-only step whenever something can be admitted (vLLM v0)
    DECODE_ONLY = "decode_only"
    PREFILL_ONLY = "prefill_only"


@dataclass(slots=True, frozen=True)
class StepPlan:
    """One step's shape chosen by a batch-forming policy; never above the instance's configured limits."""

    mode: StepMode
    token_budget: int
    max_running: int
    chunked_prefill: bool


@dataclass(slots=True, frozen=True)
class JobView:
    """What a job-level policy knows of a job when one of its stages is released: the submission
    (id, kind, template, arrival, SLO), the stages already finished and the one being released."""

    id: str
    kind: str
    template: str
    arrival_s: float
    slo_s: float
    deadline_s: float
    stage: str
    finished_stages: tuple[str, ...]

    @classmethod
    def at_release(
        cls,
        job_id: str,
        kind: str,
        template: str,
        arrival_s: float,
        slo_s: float | None,
        stage: str,
        finished_stages: Sequence[str],
    ) -> JobView:
        """The one constructor every runtime uses: the deadline follows the rule in ``core.deadline``."""
        slo = slo_or_inf(slo_s)
        return cls(
            job_id, kind, template, arrival_s, slo, absolute_deadline_s(arrival_s, slo), stage, tuple(finished_stages)
        )


@dataclass(slots=True, frozen=True)
class StageDecision:
    """What a job-level policy decides for the calls of a released stage (the same for each of them).

    ``budget_s``: each call's share of the job's remaining time (``None``: no budget). ``priority``: a static
    job priority, lower runs sooner (``None``: the call keeps its own). ``best_effort``: the job can no
    longer meet its deadline; its calls are still served, after every call that can still count.
    """

    budget_s: float | None = None
    priority: float | None = None
    best_effort: bool = False

    def apply(self, requests: Sequence[Request]) -> None:
        """Write the decision onto the runtime's requests (the runtime's step, never the policy's)."""
        for request in requests:
            if self.budget_s is not None:
                request.budget_s = self.budget_s
            if self.priority is not None:
                request.priority = self.priority
            if self.best_effort:
                request.best_effort = True
