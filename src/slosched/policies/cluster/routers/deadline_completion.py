"""Router ``deadline-completion`` (alias ``slosched``): the slosched stack's cluster layer, PRISM's
forward-looking scores driven by each call's deadline, with prefix affinity that holds under load.

One decision, as a pipeline profile:

1. **kv-fits**: instances with room for the call's prompt and predicted output (all when none has).
2. **prefix affinity** (``AffinityFilter``): the instances holding the longest prefix of the call (what the
   engine's cache holds now, or what this router sent there recently: ``cache-aware``'s prefix trees) are
   kept while the call is predicted to meet its target there, or while their pending work stays within
   ``balance_rel`` x the least loaded candidate's plus ``balance_abs_s`` (seconds of pending work at each
   instance's own peak throughput, so a slow GPU is not held to a fast GPU's share). Prefix hits save work
   for everyone, so under load the cluster's capacity depends on them; a filter that let go of affinity as
   soon as deadlines were at risk collapsed under overload (CHESS calls of one database share a long schema
   prompt). With ``affinity_yields`` (the default since 2026-12-05) holders predicted to make the call late
   yield when another instance would finish it in time, and hold when none would (overload): the load
   bound alone let one A100 of Text-to-SQL's cluster take twice the calls of the other near capacity.
3. **scores** (product, as PRISM): ``completion`` (below) for calls with a deadline and no token SLOs,
   PRISM's latency factor for calls with TTFT/TPOT SLOs, PRISM's load and KV factors, session affinity.
   Every factor sees the queue the call meets: a call that can still count does not count the relegated
   calls waiting (the engine serves them after it), in its completion nor, since 2026-12-06, in its load and
   KV factors (``factor_columns``: with the pace test on, counting them there cost Text-to-SQL 5-12% of its
   workflows near capacity).

Scorer ``predicted-completion``: ``1 / (1 + x^4)`` with ``x`` = the call's predicted latency on the
instance over the time left to its target (``call_target_s``: its apportioned budget, capped by its job's
deadline): near 1 while the call fits its budget with room, 1/2 at the budget, falling fast beyond it. The
predicted latency is the prefill pending there plus the call's own uncached prompt at the instance's peak
prefill rate, then its decode, one step of ``B + 1`` sequences per token from the instance's belief
step-time model. A call with token SLOs takes for ``x`` the worse of its TPOT (the decode step of the
running batch with it added, at their context) over its TPOT SLO and its TTFT over its TTFT SLO; a call
with neither token SLOs nor a deadline scores PRISM's latency factor.

Residents: every call with a deadline or token SLOs also answers for the calls already decoding where it
goes. The router books the TPOT SLO of each call it places until the runtime reports it finished
(``residents.TpotResidents``), and ``x`` is at least the joined step over the tightest TPOT SLO booked
there. On NexusSched's chat cluster only the H100 decodes fast enough for FlowGPT's 12 ms; without this rule
Azure's 30 ms calls filled it and FlowGPT calls missed there first (capacity @90% 12.6 -> 16.1 jobs/s,
median of 5 seeds: ``slosched bench ablation``, ``-tpot-residents``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pickers import MaxPicker
from slosched.policies.cluster.pipeline import SCORERS, Cycle, Filter, Profile, WeightedScorer
from slosched.policies.cluster.residents import TpotResidents
from slosched.policies.cluster.routers.cache_aware import CacheAffinityFilter
from slosched.policies.cluster.routers.prism import PrismFactorScorer, PrismModel, State
from slosched.policies.cluster.scorers import KvFitsFilter, SessionAffinityScorer
from slosched.policies.engine.ordering.least_slack import call_target_s
from slosched.policies.registry import NoParams, PolicyContext, setting

DECODE_REF_CONTEXT = 512  # tokens of context per decoding sequence assumed when costing a decode step
LATENCY, LOAD, KV = 0, 1, 2  # PrismModel's factor columns


def pending_s(state: State, request_tokens: float) -> float:
    """PRISM's rho: seconds of pending work at the engine's peak throughput."""
    _, prefill, pending, _, peak = state
    return (prefill + request_tokens * pending) / peak


def ahead_of_feasible(view: InstanceView, state: State) -> State:
    """``state`` without the waiting calls of relegated jobs, for a call that can still count: the stack's
    engine serves it before all of them, and holds them out of any batch with such a call (``triage``), so
    under load they pile up in the queue. Counted, they made a busy instance look jammed to the calls it
    would serve first: on Text-to-SQL at the stack's capacity (0.68 jobs/s, seed 1) attainment fell to 0.72
    from 0.90 counting only the calls ahead. Engine-exported state (LENS) is kept as exported."""
    if view.exported or not view.num_waiting:
        return state
    relegated = [request for request in view.waiting_requests if request.best_effort]
    if not relegated:
        return state
    latency, prefill, pending, free_kv, peak = state
    # A preempted call's computed prompt is not in the view's waiting prefill: never below nothing waiting.
    removed = min(float(sum(request.prompt_tokens for request in relegated)), prefill)
    return latency, prefill - removed, max(pending - len(relegated), 0.0), free_kv + removed, peak


class PredictedCompletion:
    """The call's predicted latency per instance, and the prefix trees that say where its prefix is."""

    def __init__(self, model: PrismModel, tpot_residents: bool = True) -> None:
        self.model = model
        self.prefixes = CacheAffinityFilter()  # owns the trees; its own filter rule is not used
        # None: the ablation (a call answers for its own SLOs only).
        self.residents = TpotResidents() if tpot_residents else None

    def states(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[State]:
        """PRISM's engine states of the candidates as the call meets them, computed once per decision."""
        key = (self, "states")
        states: list[State] | None = cycle.scratch.get(key)
        if states is None or len(states) != len(views):
            states = self.model.states(views)
            if not cycle.request.best_effort:
                states = [ahead_of_feasible(view, state) for view, state in zip(views, states, strict=True)]
            cycle.scratch[key] = states
        return states

    def factor_columns(self, cycle: Cycle, views: Sequence[InstanceView]) -> tuple[list[float], ...]:
        """PRISM's latency, load and KV factors over ``views`` from the states the call meets (``states``:
        for a call that can still count, without the relegated calls waiting), once per decision. PRISM's own
        columns count every waiting call: two relegated Text-to-SQL workflows starved in an A100's queue
        through a whole run (seed 1, the stack's capacity, the pace test on) kept its load and KV factors low,
        it took 1,154 of the window's calls against 2,745, and the workflows met fell from 367 to 283."""
        key = (self, "columns")
        columns: tuple[list[float], ...] | None = cycle.scratch.get(key)
        if columns is None:
            columns = cycle.scratch[key] = self.model.columns_over(cycle.request, self.states(cycle, views))
        return columns

    def latency_s(self, request: Request, view: InstanceView, state: State) -> float:
        _, prefill, _, _, peak = state
        uncached = request.prompt_tokens - self.prefixes.match_tokens(request, view)
        batch = view.num_running + 1
        decode_step = view.step_predictor.predict_s(0, 0, batch, batch * DECODE_REF_CONTEXT)
        return (prefill + uncached) / peak + max(request.predicted_output_tokens, 1.0) * decode_step

    @staticmethod
    def joined_step_s(request: Request, view: InstanceView) -> float:
        """A decode step of the instance's running batch with this call added, at their context."""
        batch = view.num_running + 1
        context = (view.num_kv_blocks - view.num_free_kv_blocks) * view.spec.block_size + request.prompt_tokens
        return view.step_predictor.predict_s(0, 0, batch, context)

    def token_slo_x(self, request: Request, view: InstanceView, state: State, step: float) -> float:
        """A call with TTFT/TPOT SLOs: the worse of its predicted TPOT (``step``: the step it joins) over its
        TPOT SLO and its predicted TTFT over its TTFT SLO. An idle slow GPU is judged by the step the call
        will decode in there, not by the zero latency of an empty batch (PRISM's ``L_e``, which sent
        FlowGPT's 12 ms calls to idle A6000s at light load, where no step is that fast)."""
        _, prefill, _, _, peak = state
        x = step / request.tpot_slo_s if request.tpot_slo_s is not None else 0.0
        if request.ttft_slo_s is not None:
            uncached = request.prompt_tokens - self.prefixes.match_tokens(request, view)
            x = max(x, ((prefill + uncached) / peak + step) / request.ttft_slo_s)
        return x

    def x_values(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[float] | None:
        """Each candidate's predicted latency over what the call allows there (1: exactly on target); None
        for a call with neither token SLOs nor a finite target (PRISM's factor scores it)."""
        request = cycle.request
        states = self.states(cycle, views)
        residents = self.residents
        tightest = [residents.tightest_s(view.index, cycle.now_s) if residents else math.inf for view in views]
        token_slos = request.ttft_slo_s is not None or request.tpot_slo_s is not None
        steps = [
            self.joined_step_s(request, view) if token_slos or math.isfinite(tight) else 0.0
            for view, tight in zip(views, tightest, strict=True)
        ]
        if token_slos:
            xs = [self.token_slo_x(request, v, st, step) for v, st, step in zip(views, states, steps, strict=True)]
        else:
            room = call_target_s(request) - cycle.now_s
            if not math.isfinite(room):
                return None
            if room <= 0:
                xs = [0.0] * len(views)  # late everywhere: the load factors decide
            else:
                xs = [self.latency_s(request, view, state) / room for view, state in zip(views, states, strict=True)]
        # The calls already decoding there: joining them must not push their step past the tightest TPOT
        # SLO among them (a 30 ms call on the one GPU fast enough for 12 ms calls crowds those out).
        return [max(x, step / tight) for x, step, tight in zip(xs, steps, tightest, strict=True)]

    def score(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[float]:
        xs = self.x_values(cycle, views)
        if xs is None:
            return self.factor_columns(cycle, views)[LATENCY]
        scores = []
        for x in xs:
            x2 = x * x
            scores.append(1.0 / (1.0 + x2 * x2))
        return scores

    def on_routed(self, cycle: Cycle, view: InstanceView) -> None:
        self.prefixes.on_routed(cycle, view)
        if self.residents is not None:
            self.residents.on_routed(cycle.request, view.index, cycle.now_s)

    def on_request_finished(self, instance_index: int, request: Request, latency_s: float, now_s: float) -> None:
        if self.residents is not None:
            self.residents.on_finished(request, instance_index)


class AffinityFilter:
    """Step 2 of the module doc."""

    def __init__(
        self,
        completion: PredictedCompletion,
        min_match: float,
        balance_rel: float,
        balance_abs_s: float,
        yields: bool = True,
    ) -> None:
        self.completion = completion
        self.min_match = min_match
        self.balance_rel = balance_rel
        self.balance_abs_s = balance_abs_s
        self.yields = yields

    def filter(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[int]:
        request = cycle.request
        everyone = list(range(len(views)))
        matches = [self.completion.prefixes.match_tokens(request, view) for view in views]
        best = max(matches)
        if best <= 0 or best < self.min_match * request.prompt_tokens:
            return everyone
        states = self.completion.states(cycle, views)
        tokens = self.completion.model.request_tokens
        loads = [pending_s(state, tokens) for state in states]
        bound = self.balance_rel * min(loads) + self.balance_abs_s
        room = call_target_s(request) - cycle.now_s

        def meets(i: int) -> bool:
            return math.isfinite(room) and self.completion.latency_s(request, views[i], states[i]) <= room

        def keep(i: int) -> bool:
            if matches[i] != best:
                return False
            return loads[i] <= bound or meets(i)

        kept = [i for i in everyone if keep(i)] or everyone
        if self.yields and not any(meets(i) for i in kept) and any(meets(i) for i in everyone):
            return everyone  # the holders would make the call late where another instance would not
        return kept


class DeadlineCompletionRouter(Profile):
    """The module doc's profile."""

    def __init__(
        self,
        min_match: float = 0.3,
        balance_rel: float = 4.0,
        balance_abs_s: float = 30.0,
        tpot_residents: bool = True,
        affinity_yields: bool = True,
    ) -> None:
        self.model = PrismModel()
        self.completion = PredictedCompletion(self.model, tpot_residents)
        affinity = AffinityFilter(self.completion, min_match, balance_rel, balance_abs_s, affinity_yields)
        filters: list[Filter] = [KvFitsFilter(), affinity]
        scorers = [
            WeightedScorer("predicted-completion", self.completion),
            WeightedScorer("prism-load", PrismFactorScorer(self.completion.factor_columns, LOAD)),
            WeightedScorer("prism-kv", PrismFactorScorer(self.completion.factor_columns, KV)),
            WeightedScorer("session-affinity", SessionAffinityScorer(miss_score=0.5)),
        ]
        super().__init__(filters, scorers, MaxPicker("product", relax=("prism-kv",)))


@SCORERS.register("predicted-completion", params=NoParams)
def build_scorer(params: NoParams, context: PolicyContext) -> PredictedCompletion:
    return PredictedCompletion(PrismModel())


@dataclass(frozen=True, slots=True)
class DeadlineCompletionParams:
    min_match: float = setting(0.3, "least matched fraction of the prompt for prefix affinity to apply (>= 0)")
    balance_rel: float = setting(4.0, "prefix holders stay while their pending work <= balance_rel x the least (>= 0)")
    balance_abs_s: float = setting(30.0, "... plus this many seconds of pending work (>= 0)")
    tpot_residents: bool = setting(True, "a call must not push the step past the tightest TPOT SLO decoding there")
    affinity_yields: bool = setting(
        True, "prefix holders predicted to make the call late yield when another instance would not"
    )

    def __post_init__(self) -> None:
        for name in ("min_match", "balance_rel", "balance_abs_s"):
            value = getattr(self, name)
            if not value >= 0:
                raise ConfigError(f"deadline-completion.{name}", f"must be >= 0, got {value}")


@ROUTERS.register("deadline-completion", params=DeadlineCompletionParams)
def build(params: DeadlineCompletionParams, context: PolicyContext) -> DeadlineCompletionRouter:
    return DeadlineCompletionRouter(
        params.min_match, params.balance_rel, params.balance_abs_s, params.tpot_residents, params.affinity_yields
    )
