"""Hand-built engine views for the deadline-driven engine parts (the stack's ordering, triage and
deadline-budget batching): a sequence and an engine with only the fields those parts read."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.perf.linear import LinearStepPredictor

SPEC = InstanceSpec(name="i", gpu="A100-80G", model="Llama-3-8B", max_running=8, max_batched_tokens=4096)


@dataclass
class FakeSeq:
    request: Request
    num_output_tokens: int = 0
    enqueue_s: float = 0.0
    first_token_s: float | None = None
    num_computed_tokens: int = 0

    @property
    def num_prompt_tokens(self) -> int:
        return self.request.prompt_tokens


@dataclass
class FakeEngine:
    now_s: float
    waiting: list[FakeSeq] = field(default_factory=list)
    running: list[FakeSeq] = field(default_factory=list)
    spec: InstanceSpec = SPEC
    step_predictor: LinearStepPredictor = field(default_factory=LinearStepPredictor)

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def running_seqs(self) -> list[FakeSeq]:
        return self.running


def call(
    name: str,
    deadline_s: float = math.inf,
    budget_s: float | None = None,
    arrival_s: float = 0.0,
    prompt: int = 100,
    predicted: float = 50.0,
    tpot: float | None = None,
) -> Request:
    return Request(
        name,
        f"job-{name}",
        "s",
        "t",
        prompt,
        256,
        arrival_s,
        arrival_s,
        deadline_s=deadline_s,
        budget_s=budget_s,
        predicted_output_tokens=predicted,
        tpot_slo_s=tpot,
    )
