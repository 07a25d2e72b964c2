"""Small fakes of the engine views for RelServe's policy tests (no simulator involved)."""

from __future__ import annotations

from dataclasses import dataclass, field

from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.engine.ordering.relserve_model import RelServeStepModel


@dataclass
class FakeSeq:
    request: Request
    num_prompt_tokens: int
    num_computed_tokens: int = 0
    num_output_tokens: int = 0
    enqueue_s: float = 0.0
    first_token_s: float | None = None
    num_preemptions: int = 0


@dataclass
class FakeEngine:
    spec: InstanceSpec
    now_s: float = 0.0
    running_seqs: list[FakeSeq] = field(default_factory=list)
    waiting: list[FakeSeq] = field(default_factory=list)
    num_kv_blocks: int = 1000
    num_free_kv_blocks: int = 1000
    cached: dict[str, int] = field(default_factory=dict)  # request id -> cached prompt tokens
    step_predictor: LinearStepPredictor = field(default_factory=LinearStepPredictor)

    @property
    def num_running(self) -> int:
        return len(self.running_seqs)

    def cached_prefix_tokens(self, request: Request) -> int:
        return self.cached.get(request.id, 0)


class FixedLines(RelServeStepModel):
    """A step model with given coefficients, for hand-worked numbers."""

    def __init__(self, ap: float, bp: float, ad: float, bd: float) -> None:
        super().__init__()
        self.fixed = (ap, bp, ad, bd)

    def bind_prior(self, predictor: object) -> None:
        return None

    def coefficients(self) -> tuple[float, float, float, float]:
        return self.fixed


def spec(max_running: int = 16, max_batched_tokens: int = 1000) -> InstanceSpec:
    return InstanceSpec(
        name="i0", gpu="A100-40G", model="OPT-13B", max_running=max_running, max_batched_tokens=max_batched_tokens
    )


def make_rows(
    job: str, count: int, prompt: int = 200, max_output: int = 10, predicted: float = 4.0, arrival_s: float = 0.0
) -> list[FakeSeq]:
    rows = []
    for index in range(count):
        request = Request(
            id=f"{job}/rows/{index}",
            job_id=job,
            stage="rows",
            template="t",
            prompt_tokens=prompt,
            max_output_tokens=max_output,
            arrival_s=arrival_s,
            job_arrival_s=arrival_s,
            predicted_output_tokens=predicted,
        )
        rows.append(FakeSeq(request, prompt))
    return rows


def running(rows: list[FakeSeq], generated: int = 1) -> list[FakeSeq]:
    """Mark rows as prefilled with ``generated`` output tokens so far."""
    for seq in rows:
        seq.num_computed_tokens = seq.num_prompt_tokens
        seq.num_output_tokens = generated
    return rows
