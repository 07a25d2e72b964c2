"""Hexgen-Text2SQL policies: cost model, stage budgets, urgency ordering, workload-balanced routing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from slosched.core.request import Request
from slosched.core.views import JobView
from slosched.perf.linear import LinearStepCoefficients, LinearStepPredictor
from slosched.policies.cluster.routers.workload_balanced import WorkloadBalancedRouter
from slosched.policies.cost import t_comp_s, t_queue_s
from slosched.policies.engine.ordering.urgency import UrgencyOrdering, urgency
from slosched.policies.job import stage_budget
from slosched.policies.job.stage_budget import StageBudget
from slosched.policies.job.workflow_templates import TemplateStage, WorkflowTemplate, workflow_template

# 10 ms per step, 0.1 ms per prefill token, nothing else: t_comp(p, o) = 0.01 + 1e-4 p + 0.01 (o - 1).
SIMPLE = LinearStepCoefficients(0.01, 1e-4, 0.0, 0.0)
SLOW = LinearStepCoefficients(0.02, 2e-4, 0.0, 0.0)


def _predictor(coefficients: LinearStepCoefficients = SIMPLE) -> LinearStepPredictor:
    return LinearStepPredictor(prior=coefficients)


def _request(rid: str, prompt: int, out: float, budget: float | None = None, deadline: float = math.inf) -> Request:
    request = Request(rid, "j", "s", "t", prompt, 4096, 0.0, 0.0, deadline_s=deadline, budget_s=budget)
    request.predicted_output_tokens = out
    return request


def test_t_comp_is_prefill_plus_predicted_decode() -> None:
    assert t_comp_s(1000, 11, _predictor()) == pytest.approx(0.11 + 10 * 0.01)
    assert t_comp_s(1000, 1, _predictor()) == pytest.approx(0.11)


@dataclass
class _Seq:
    request: Request
    enqueue_s: float


@dataclass
class _Engine:
    now_s: float
    step_predictor: LinearStepPredictor = field(default_factory=_predictor)


def test_urgency_ordering_matches_a_hand_computed_example() -> None:
    engine = _Engine(now_s=3.0)
    seqs = {
        "r1": _Seq(_request("r1", 1000, 11, budget=5.0), 0.0),  # U = 0.21 - (5 - 3) = -1.79
        "r2": _Seq(_request("r2", 2000, 101, budget=3.5), 2.0),  # U = 1.21 - (3.5 - 1) = -1.29
        "r3": _Seq(_request("r3", 500, 1), 1.0),  # no budget, no deadline: -inf, runs last
        "r4": _Seq(_request("r4", 500, 1, deadline=10.0), 1.0),  # budget = 10 - 1: U = 0.06 - 7 = -6.94
    }
    expected = {"r1": -1.79, "r2": -1.29, "r3": -math.inf, "r4": -6.94}
    for name, seq in seqs.items():
        assert urgency(seq, engine) == pytest.approx(expected[name])  # type: ignore[arg-type]
    ordering = UrgencyOrdering()
    order = sorted(seqs, key=lambda name: ordering.key(seqs[name], engine))  # type: ignore[arg-type]
    assert order == ["r2", "r1", "r4", "r3"]
    later = _Engine(now_s=5.0)  # every second queued adds a second of urgency
    assert urgency(seqs["r1"], later) - urgency(seqs["r1"], engine) == pytest.approx(2.0)  # type: ignore[arg-type]
    assert not ordering.static_keys and not ordering.time_invariant


CHAIN = WorkflowTemplate(
    "chain",
    (TemplateStage("S1", 1000, 11), TemplateStage("S2", 3000, 51), TemplateStage("S3", 500, 21)),
)


def _job(stage: str, finished: tuple[str, ...], deadline: float = 100.0) -> JobView:
    return JobView("j", "workflow", "chain", 0.0, deadline, deadline, stage, finished)


def test_budgets_sum_to_the_remaining_slo_and_shrink(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stage_budget, "workflow_template", lambda name: CHAIN)
    policy = StageBudget([_predictor(), _predictor(SLOW)])
    costs = [policy.mean_cost_s(s.input_tokens, s.output_tokens) for s in CHAIN.stages]
    budgets = []
    now = 10.0
    for index, stage in enumerate(CHAIN.stages):
        request = _request(stage.name, int(stage.input_tokens), stage.output_tokens)
        policy.decide(_job(stage.name, tuple(s.name for s in CHAIN.stages[:index])), [request], now).apply([request])
        assert request.budget_s is not None
        budgets.append(request.budget_s)
        now += request.budget_s  # each stage finishes exactly on its budget
    assert sum(budgets) == pytest.approx(100.0 - 10.0)  # the remaining SLO at the first release
    assert budgets[0] == pytest.approx(90.0 * costs[0] / sum(costs))
    late = _request("S1", 1000, 11)
    policy.decide(_job("S1", ()), [late], 40.0).apply([late])
    assert late.budget_s is not None and late.budget_s < budgets[0]  # less time left, smaller budget


def test_budget_without_template_or_deadline() -> None:
    policy = StageBudget([_predictor()])
    unknown = _request("x", 100, 5)
    policy.decide(JobView("j", "workflow", "other", 0.0, 50.0, 50.0, "A", ()), [unknown], 20.0).apply([unknown])
    assert unknown.budget_s == pytest.approx(30.0)
    free = _request("y", 100, 5)
    policy.decide(JobView("j", "workflow", "other", 0.0, math.inf, math.inf, "A", ()), [free], 20.0).apply([free])
    assert free.budget_s is None


def test_chess_template_expects_fewer_stages_as_the_job_advances() -> None:
    template = workflow_template("text2sql-chess")
    assert template is not None
    early = template.expected_after("IR1", ())
    after_gen = template.expected_after("GEN", ("IR1", "KW", "IR2", "IR3", "IR4"))
    deep = template.expected_after("REVISE9", ())
    assert early is not None and after_gen is not None and deep is not None
    assert sum(s.weight for s in early) > sum(s.weight for s in after_gen)
    assert {s.name for s in after_gen}.isdisjoint({"IR5", "KW", "GEN"})
    assert deep[0].name == "REVISE" and deep[0].weight == pytest.approx(1 / 3)  # P(10 | >= 9) = 1/3
    assert template.expected_after("NOPE", ()) is None


@dataclass
class _Instance:
    index: int
    step_predictor: LinearStepPredictor
    waiting_requests: list[Request]
    outstanding_decode_tokens: float = 0.0


def test_workload_balanced_trades_speed_for_balance() -> None:
    queued = [_request(f"q{i}", 4000, 200) for i in range(3)]
    fast = _Instance(0, _predictor(), queued, outstanding_decode_tokens=600.0)
    slow = _Instance(1, _predictor(SLOW), [])
    assert t_queue_s(fast) == pytest.approx(3 * t_comp_s(4000, 200, _predictor()))  # type: ignore[arg-type]
    assert t_queue_s(slow) == 0.0  # type: ignore[arg-type]
    request = _request("new", 8000, 300)
    views = [fast, slow]
    assert WorkloadBalancedRouter(0.0, 100.0, 1.0).route(request, views, 0.0) == 1  # type: ignore[arg-type]
    assert WorkloadBalancedRouter(1.0, 100.0, 1.0).route(request, views, 0.0) == 0  # type: ignore[arg-type]
    empty = WorkloadBalancedRouter(0.5, 100.0, 1.0).score(request, slow, 0.0)  # type: ignore[arg-type]
    assert math.isfinite(empty)


@pytest.mark.parametrize(
    "pair", ["round-robin+fcfs", "round-robin+urgency", "workload-balanced+fcfs", "workload-balanced+urgency"]
)
def test_presets_run_chess_workflows_end_to_end(pair: str) -> None:
    from slosched.bench.hexgen.setup import cluster, trace
    from slosched.core.request import Outcome
    from slosched.sim.options import SimOptions
    from slosched.sim.runner import PolicyPair, PolicyParams, simulate

    jobs = trace("natural", 0.5, 6, seed=5)
    params = PolicyParams(router={"workload-balanced": {"alpha": 0.3}})
    result = simulate(
        cluster("hetero1"), jobs, PolicyPair.parse(pair), 0, SimOptions(slo_scale=5.0), params, "stage-budget"
    )
    assert all(job.outcome is Outcome.COMPLETED for job in result.jobs)
    assert len(result.requests) == sum(job.num_calls for job in jobs)
