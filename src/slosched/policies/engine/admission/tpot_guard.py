"""The TPOT guard of admission ``triage``: a call joins the running batch only while the decode step it makes
stays within ``share`` x the tightest TPOT SLO of the batch (the calls running, those joining in this pass,
and itself), as the instance's belief step-time model predicts that step.

Why: a continuous-batching engine admits every call the KV cache holds, so under overload the decode batch
widens until each step outgrows the TPOT SLOs of the calls already decoding, and they all miss together. On
the stack bench's chat workload at 2x the strongest baseline's capacity (one seed), 579 of 639 FlowGPT calls
(TPOT SLO 12 ms) missed their TPOT. Held in the queue instead, a call waits for the batch to shrink while its
TTFT SLO still can be met (the ``least-slack`` ordering demotes it once it cannot), and the calls decoding
keep the SLOs they were admitted with. ``share`` < 1 leaves the rest of the step to prefill chunks (the
``deadline-budget`` batching sizes those to the same bound).

An idle engine always takes a call (a call alone must be served however slow its step). Without
``deadlines`` a batch whose calls carry no TPOT SLO bounds nothing (deadlines size the step budget instead,
``deadline-budget``); with it, a running workflow stage on a budget that ends before its job's deadline bounds
the step too, by its slack per predicted remaining token, the bound ``deadline-budget`` sizes steps to
(``tightest_step_s``; a stage past saving, whose bound is already below the running batch's own decode step
over ``share``, bounds nothing). Why: prefill chunks were sized to that bound, but nothing held the *number*
of calls decoding to it, so under overload a workflow's long stages decoded in a batch whose every step outgrew
their share of the time left, and the stages after them paid: on Text-to-SQL at 3x the strongest baseline's
capacity (seed 1) half the workflows the job layer admitted missed, at a median 4.3x their SLO (a 713-token
generation took 52 s on an A100, 73 ms a token). ``bench attainment`` (Text-to-SQL, 5 seeds x 400 workflows,
at 1/1.1/1.2/1.5/2/3x): 0.959/0.930/0.856/0.671/0.511/0.330 of the jobs met with it, 0.959/0.928/0.886/0.646/
0.442/0.292 without. Calls on their job's own deadline (single calls, relQuery rows, a workflow's last stage)
bound nothing: no later stage pays for their lateness, and holding calls back for them cost relQueries
0.552 -> 0.534 and 0.361 -> 0.321 of the jobs at 2x and 3x (seeds 1-3), leaving Text-to-SQL where it was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slosched.core.views import EngineView, SeqView
from slosched.policies.engine.batching.deadline_budget import tightest_step_s


@dataclass(slots=True)
class TpotGuard:
    """One admission pass's decode batch (``begin`` at the pass's start, ``joined`` per admission)."""

    share: float
    deadlines: bool = False
    decoding: int = 0
    context_tokens: int = 0
    bound_s: float = math.inf
    # The batch is full for every call: one more decode with no context of its own already outgrows the bound
    # (None: not asked yet since the batch last changed). Under overload the queue is long and most of a pass's
    # calls meet a full batch, so this saves a prediction per waiting call.
    full: bool | None = None

    def begin(self, engine: EngineView) -> None:
        running = engine.running_seqs
        self.decoding = len(running)
        self.context_tokens = sum(seq.num_computed_tokens for seq in running)
        slos = [seq.request.tpot_slo_s for seq in running if seq.request.tpot_slo_s is not None]
        self.bound_s = min(slos, default=math.inf)
        if self.deadlines and running:
            floor_s = engine.step_predictor.predict_s(0, 0, self.decoding, self.context_tokens) / self.share
            self.bound_s = min(self.bound_s, tightest_step_s(running, engine.now_s, floor_s, math.inf))
        self.full = None

    def admits(self, seq: SeqView, engine: EngineView) -> bool:
        own = seq.request.tpot_slo_s
        bound = self.bound_s if own is None else min(self.bound_s, own)
        if self.decoding == 0 or math.isinf(bound):
            return True
        predictor = engine.step_predictor
        if self.full is None and math.isfinite(self.bound_s):
            floor_s = predictor.predict_s(0, 0, self.decoding + 1, self.context_tokens)
            self.full = floor_s > self.share * self.bound_s
        if self.full:  # a call's own SLO only tightens the bound, and its prompt only lengthens the step
            return False
        step_s = predictor.predict_s(0, 0, self.decoding + 1, self.context_tokens + seq.num_prompt_tokens)
        return step_s <= self.share * bound

    def joined(self, seq: SeqView) -> None:
        self.decoding += 1
        self.context_tokens += seq.num_prompt_tokens
        if seq.request.tpot_slo_s is not None:
            self.bound_s = min(self.bound_s, seq.request.tpot_slo_s)
        self.full = None
