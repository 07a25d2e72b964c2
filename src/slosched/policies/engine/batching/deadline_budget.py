"""Batching ``deadline-budget``: chunked prefill whose per-step token budget is sized to the tightest
running call, from the instance's own belief step-time model (the slosched stack's engine, DESIGN 4.5).

Each step must advance every running call fast enough for it: a call with a TPOT SLO needs a step no
longer than that SLO; a call with a deadline needs ``slack / predicted remaining tokens`` per step (its
share of the time left; ``lens_deadline.step_bound_s``); a late call, one without either, one whose job was
relegated, or one needing a step shorter than the running batch's decode alone (past saving by any budget)
bounds nothing.
The budget is the largest number of tokens (decodes plus prefill chunks) whose predicted step time stays
within ``margin`` x the tightest bound, never below ``min_budget`` (prefill must progress) nor above the
instance's max batched tokens nor ``token_budget``; with no bound at all it is that ceiling. An idle engine gets
the ceiling at once; otherwise every step reads the running calls (O(batch): a running call may still be
prefilling in chunks, which the view does not say cheaply) and bisects the budget (about ten predictions).

``yield_to_queue`` (on by default): while steps at the ceiling would start every waiting call that can still count
early enough to decode it by its deadline (``queue_keeps_up``: the queue in its own order, each call's prefill
after those ahead of it at the ceiling's rate, then its predicted decode one step at a time), a call on its
job's own deadline bounds no step; once the queue outgrows that, the bound is back. Calls with a TPOT SLO
still bound every step, and so does a workflow stage whose budget ends before its job's deadline: its lateness
is taken from the stages still to come, which the queue check (each waiting call's own deadline) does not weigh
(yielding for them cost Text-to-SQL 4% at capacity on every seed probed). Near capacity the bound starved the
prefill of a slower instance that the router kept feeding (code, 1x, seed 1: 230 calls waiting on the L40S
with 586 KV blocks free); under overload it is what keeps running calls on time.
docs/stack.md ("Code: steps sized for calls past saving") has the probes and the stack bench's re-measure
that made it the default; ``yield_to_queue: false`` keeps every deadline bounding.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.core.views import EngineView, SeqView, StepMode, StepPlan
from slosched.policies.engine.base import BATCHINGS
from slosched.policies.engine.batching.lens_deadline import call_deadline_s, remaining_steps
from slosched.policies.registry import PolicyContext, setting

DECODE_REF_CONTEXT = 512
# Most waiting calls ``queue_keeps_up`` reads: it runs at every step, so its cost is bounded; calls further back
# are not judged (those ahead of them are).
QUEUE_SCAN = 256
STAGE_SHARE_TOLERANCE_S = 1e-6  # release + budget rounds off the job deadline it was derived from


@dataclass(frozen=True, slots=True)
class DeadlineBudgetParams:
    token_budget: int = setting(512, "the most tokens a step may carry (capped by the instance's max batched tokens)")
    min_budget: int = setting(128, "the fewest tokens a step is given, so prefill always progresses")
    margin: float = setting(0.8, "fraction of the tightest running call's step bound the predicted step may use")
    yield_to_queue: bool = setting(
        True,
        "running calls on their job's own deadline bound no step while the ceiling would start every waiting call "
        "that can still count in time",
    )

    def __post_init__(self) -> None:
        if self.token_budget < 1 or self.min_budget < 1:
            raise ConfigError("deadline-budget.token_budget / min_budget", "must be >= 1")
        if not self.margin > 0:
            raise ConfigError("deadline-budget.margin", f"must be > 0, got {self.margin}")


def tightest_step_s(
    running: Sequence[SeqView], now_s: float, floor_s: float = 0.0, final_floor_s: float | None = None
) -> float:
    """The shortest step any running call needs (inf when none needs one). ``final_floor_s``: the floor for
    calls on their job's own deadline (no stage budget ending before it), when it differs from ``floor_s``.

    A call with a deadline and no TPOT SLO bounds nothing when its job was relegated, or when it needs a step
    shorter than ``floor_s`` (the decode-only step of the running batch, over the margin): no budget can save
    it, and sizing steps down to the floor for it only starves the prefills of calls that can still count
    (on the KV-limited code workload near capacity such calls held every step at the floor budget)."""
    # The hottest loop of the stack's runs (every step reads every running call): ``call_deadline_s`` and
    # ``remaining_steps`` are inlined and ``min`` is a comparison, the same arithmetic (a property test holds it
    # to the helpers' rule; the stack's records are unchanged). Measured interleaved on the stack bench's code
    # workbench, 3,000 jobs at 45 jobs/s, seed 1: the stack's whole run 3.42 / 3.54 s -> 2.64 / 2.47 s.
    bound = math.inf
    for seq in running:
        request = seq.request
        tpot_slo_s = request.tpot_slo_s
        if tpot_slo_s is not None:
            if tpot_slo_s < bound:
                bound = tpot_slo_s
            continue
        if request.best_effort:  # (asked first: under overload most running calls are relegated ones)
            continue
        deadline = job_deadline = request.deadline_s
        budget_s = request.budget_s
        if budget_s is not None and request.arrival_s + budget_s < deadline:
            deadline = request.arrival_s + budget_s
        slack = deadline - now_s
        if not 0.0 < slack < math.inf:
            continue
        steps_left = request.predicted_output_tokens - seq.num_output_tokens
        needed = slack / (steps_left if steps_left > 1.0 else 1.0)
        floor = floor_s
        if final_floor_s is not None and deadline >= job_deadline - STAGE_SHARE_TOLERANCE_S:
            floor = final_floor_s  # on its job's own deadline: no later stage pays for its lateness
        if needed >= floor and needed < bound:
            bound = needed
    return bound


def queue_keeps_up(engine: EngineView, ceiling: int, limit: int = QUEUE_SCAN) -> bool:
    """Whether steps at ``ceiling`` would start every waiting call that can still count (not best effort, its
    deadline ahead) early enough to decode it by its deadline, the queue served in its own order (at most
    ``limit`` calls read). False when no such call waits: there is nothing to yield to."""
    predictor = engine.step_predictor
    decoding = engine.num_running
    context = decoding * DECODE_REF_CONTEXT
    per_step = max(ceiling - decoding, 1)
    step_s = predictor.predict_s(per_step, 0, decoding, context)
    decode_s = predictor.predict_s(0, 0, decoding + 1, context + DECODE_REF_CONTEXT)
    queued_tokens = 0
    counted = 0
    for seq in itertools.islice(engine.waiting, limit):  # (a runtime's queue may be a deque)
        request = seq.request
        if request.best_effort:
            continue
        deadline = call_deadline_s(request)
        if not engine.now_s < deadline < math.inf:
            continue
        counted += 1
        queued_tokens += max(seq.num_prompt_tokens - seq.num_computed_tokens, 1)
        start_s = engine.now_s + math.ceil(queued_tokens / per_step) * step_s
        if start_s + remaining_steps(request, 0) * decode_s > deadline:
            return False
    return counted > 0


class DeadlineBudgetBatching:
    time_invariant = False

    def __init__(self, token_budget: int, min_budget: int, margin: float, yield_to_queue: bool = True) -> None:
        self.token_budget = token_budget
        self.min_budget = min_budget
        self.margin = margin
        self.yield_to_queue = yield_to_queue
        self.last_budget = token_budget

    def plan(self, engine: EngineView) -> StepPlan:
        spec = engine.spec
        ceiling = min(self.token_budget, spec.max_batched_tokens)
        if not engine.waiting and not engine.num_running:
            return StepPlan(StepMode.MIXED, ceiling, spec.max_running, True)
        decoding = engine.num_running
        floor_s = engine.step_predictor.predict_s(0, 0, decoding, decoding * DECODE_REF_CONTEXT) / self.margin
        if self.yield_to_queue and queue_keeps_up(engine, ceiling):
            bound = tightest_step_s(engine.running_seqs, engine.now_s, floor_s, math.inf)
        else:
            bound = tightest_step_s(engine.running_seqs, engine.now_s, floor_s)
        budget = ceiling if math.isinf(bound) else self.sized(engine, bound, ceiling)
        self.last_budget = budget
        return StepPlan(StepMode.MIXED, budget, spec.max_running, True)

    def sized(self, engine: EngineView, bound_s: float, ceiling: int) -> int:
        """Largest budget in [min_budget, ceiling] whose predicted step fits ``margin * bound_s``."""
        predictor = engine.step_predictor
        decoding = engine.num_running
        context = decoding * DECODE_REF_CONTEXT
        limit = self.margin * bound_s
        low, high = min(self.min_budget, ceiling), ceiling
        if predictor.predict_s(max(high - decoding, 0), 0, decoding, context) <= limit:
            return high
        for _ in range(10):
            if high - low <= 16:
                break
            middle = (low + high) // 2
            if predictor.predict_s(max(middle - decoding, 0), 0, decoding, context) <= limit:
                low = middle
            else:
                high = middle
        return low


@BATCHINGS.register("deadline-budget", params=DeadlineBudgetParams)
def build(params: DeadlineBudgetParams, context: PolicyContext) -> DeadlineBudgetBatching:
    return DeadlineBudgetBatching(params.token_budget, params.min_budget, params.margin, params.yield_to_queue)
