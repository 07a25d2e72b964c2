"""Batching for RelServe: the Adaptive Batch Arranger (ABA), and admission ``relserve-single``.

Each iteration compares two candidates: the *decode* batch (every running request) and the *prefill*
batch (waiting requests in DPU priority order, all from the single most urgent waiting job ``p``).
With priorities lower = sooner, ``m_p`` the prefill candidate's and ``m_d`` the smallest among running
jobs (DESIGN 4.3's three cases):

- ``m_p < m_d``: a shorter job preempts the running ones: prefill.
- ``m_p == m_d`` (``p`` is the most urgent running job): prefill, widening its decode batch.
- ``m_p > m_d``: the *tail* case; the latency-delta rule runs the prefill iff ``D+ - D- < 0`` with
  ``D+ = prefill(p) * |running jobs| + sum_R ad * requests(p) * min(OL(R), OL(p))`` (what prefilling now
  costs the running jobs) and ``D- = |waiting jobs| * bd * min(OL(p), max_R OL(R))`` (what deferring
  ``p`` costs: its decode steps would later run separately). ``tail_rule`` ``prefill`` / ``decode``
  replace the rule by a fixed choice (the PP / DP ablations).

With ``mixed_prefill`` (default) a prefill step also carries the running decodes, so ``D+`` charges the
running jobs the prefill's time beyond one decode step; without it, steps are prefill-only or decode-only
as in the paper's vLLM v0 engine. OL is, as the paper defines it, a relQuery's output length limit
(the ``max_tokens`` of its requests; ``output_length="limit"``, the default). ``output_length="predicted"``
uses the predicted remaining output within that limit instead: a belief usually much shorter, which
shrinks both sides' decode terms and so weighs the prefill's own time more (the tail case decodes more
often). The prefill candidate is sized like the engine will admit it: the token budget, free running
slots and free KV blocks. When the prefill cannot start (no slot or no KV) the arranger decodes. The
admission part lets only ``p``'s requests into a prefill step.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slosched.core.views import EngineView, SeqView, StepMode, StepPlan
from slosched.policies.engine.ordering.relserve_decompose import kv_blocks
from slosched.policies.engine.ordering.relserve_priority import DynamicPriorityUpdater, expected_output_tokens

TAIL_RULES = ("delta", "prefill", "decode")
OUTPUT_LENGTHS = ("limit", "predicted")


@dataclass(slots=True, frozen=True)
class PrefillCandidate:
    job_id: str
    num_requests: int
    uncached_tokens: float
    output_tokens: int


class AdaptiveBatchArranger:
    time_invariant = False

    def __init__(
        self,
        dpu: DynamicPriorityUpdater,
        tail_rule: str = "delta",
        mixed_prefill: bool = True,
        output_length: str = "limit",
    ) -> None:
        if tail_rule not in TAIL_RULES:
            raise ValueError(f"tail_rule must be one of {TAIL_RULES}, got {tail_rule!r}")
        if output_length not in OUTPUT_LENGTHS:
            raise ValueError(f"output_length must be one of {OUTPUT_LENGTHS}, got {output_length!r}")
        self.dpu = dpu
        self.tail_rule = tail_rule
        self.mixed_prefill = mixed_prefill
        self.output_length = output_length
        self.chosen_job: str | None = None
        self.last_case = ""
        self.cases: dict[str, int] = {}
        # (running, waiting, free KV) when the last prefill was planned: equal again means that prefill
        # admitted nothing (the mechanism's KV accounting is finer than ours), so decode to make room.
        self._prefill_state: tuple[int, int, int] | None = None

    def plan(self, engine: EngineView) -> StepPlan:
        meter = self.dpu.meter
        start = time.perf_counter()
        dpu_before = meter.dpu_s
        state = (engine.num_running, len(engine.waiting), engine.num_free_kv_blocks)
        prefill = self.decide(engine)
        if prefill and state == self._prefill_state and engine.num_running:
            prefill = self._case("decode-prefill-stalled", False)
        self._prefill_state = state if prefill else None
        spec = engine.spec
        mode = StepMode.DECODE_ONLY
        if prefill:
            mode = StepMode.MIXED if self.mixed_prefill else StepMode.PREFILL_ONLY
        plan = StepPlan(mode, spec.max_batched_tokens, spec.max_running, False)
        meter.aba_s += time.perf_counter() - start - (meter.dpu_s - dpu_before)
        meter.num_iterations += 1
        return plan

    def decide(self, engine: EngineView) -> bool:
        """True: run the prefill candidate next; False: decode. Sets ``chosen_job`` and ``last_case``."""
        priority = self.dpu.refresh(engine)
        top = self.dpu.top_waiting_job
        self.chosen_job = top
        if top is None:
            return self._case("decode-nothing-waits", False)
        if not engine.num_running:
            return self._case("prefill-idle", True)
        candidate = self.prefill_candidate(engine, top)
        if candidate is None:
            return self._case("decode-no-room", False)
        running = self.dpu.running_by_job
        m_decode = min(priority[job] for job in running)
        m_prefill = priority[top]
        if m_prefill < m_decode:
            return self._case("prefill-shorter", True)
        if m_prefill == m_decode:
            return self._case("prefill-same", True)
        if self.tail_rule != "delta":
            return self._case(f"tail-{self.tail_rule}", self.tail_rule == "prefill")
        delta = self.latency_delta_s(engine, candidate, running)
        return self._case("tail-delta-prefill" if delta < 0 else "tail-delta-decode", delta < 0)

    def latency_delta_s(
        self, engine: EngineView, candidate: PrefillCandidate, running: Mapping[str, list[SeqView]]
    ) -> float:
        """``D+ - D-`` of DESIGN 4.3 (seconds of latency summed over the affected jobs)."""
        model = self.dpu.model
        _, _, ad, bd = model.coefficients()
        out_p = candidate.output_tokens
        outs = [self.output_limit(seqs) for seqs in running.values()]
        # A prefill step that carries the running decodes delays them by the prefill's extra time only.
        prefill_s = model.prefill_s(candidate.uncached_tokens)
        if self.mixed_prefill:
            prefill_s = max(0.0, prefill_s - model.decode_s(engine.num_running))
        d_plus = prefill_s * len(running)
        d_plus += sum(ad * candidate.num_requests * min(out_r, out_p) for out_r in outs)
        num_waiting_jobs = len({seq.request.job_id for seq in engine.waiting})
        d_minus = num_waiting_jobs * bd * min(out_p, max(outs))
        return d_plus - d_minus

    def prefill_candidate(self, engine: EngineView, job: str) -> PrefillCandidate | None:
        """``job``'s waiting requests, in order, that one prefill step could admit (None: not even one)."""
        spec = engine.spec
        slots = spec.max_running - engine.num_running
        free_blocks = engine.num_free_kv_blocks
        seqs = sorted(
            (seq for seq in engine.waiting if seq.request.job_id == job),
            key=lambda seq: (seq.request.arrival_s, seq.request.id),
        )
        if slots <= 0 or not seqs:
            return None
        cached = engine.cached_prefix_tokens
        tokens = 0.0
        count = 0
        for seq in seqs[:slots]:
            hit = min(cached(seq.request), (seq.num_prompt_tokens - 1) // spec.block_size * spec.block_size)
            uncached = seq.num_prompt_tokens - hit
            blocks = kv_blocks(uncached, spec.block_size)
            if count and (tokens + uncached > spec.max_batched_tokens or blocks > free_blocks):
                break
            if blocks > free_blocks:
                return None
            free_blocks -= blocks
            tokens += uncached
            count += 1
        output = self.output_limit(seqs[:count])
        return PrefillCandidate(job, count, tokens, output)

    def output_limit(self, seqs: Sequence[SeqView]) -> int:
        """OL of a relQuery from its requests ``seqs`` (>= 1): the largest ``max_tokens`` (paper), or the
        largest predicted remaining output with ``output_length="predicted"``."""
        if self.output_length == "limit":
            return max(max(1, seq.request.max_output_tokens) for seq in seqs)
        return max(max(1, expected_output_tokens(seq.request) - seq.num_output_tokens) for seq in seqs)

    def _case(self, name: str, prefill: bool) -> bool:
        self.last_case = name
        self.cases[name] = self.cases.get(name, 0) + 1
        return prefill


class SingleJobAdmission:
    """Admission ``relserve-single``: a prefill step takes requests of the arranger's chosen job only."""

    time_invariant = False

    def __init__(self, arranger: AdaptiveBatchArranger) -> None:
        self.arranger = arranger

    def admit(self, seq: SeqView, engine: EngineView) -> bool:
        chosen = self.arranger.chosen_job
        return chosen is None or seq.request.job_id == chosen
