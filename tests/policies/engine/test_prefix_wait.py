"""Admission ``prefix-wait`` (and the stack's ``prefix_wait`` key): a call waits while another computes the
shareable prefix it lacks. On the simulated engine (vLLM v1's prefix cache, which caches a block when a step is
scheduled to compute it) rows admitted together already share their template, so the rule holds next to nobody;
on a cache that holds a block only once its prefill ends (SGLang's) it holds the followers of a prefilling
leader. Without a shareable prefix nothing changes."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from slosched.core.job import JobSpec
from slosched.core.records import RunResult
from slosched.core.request import PrefixId, Request
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.engine.admission.prefix_wait import PrefixWait
from slosched.policies.engine.base import ADMISSIONS
from slosched.policies.registry import PolicyContext
from slosched.policies.spec import PolicyParams
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from slosched.workloads.relquery import relquery_job
from tests.conftest import make_instance

SPECS = (make_instance("a100-0"),)


def _run(engine: str, jobs: list[JobSpec], params: PolicyParams | None = None) -> RunResult:
    pair = PolicyPair.parse(f"round-robin+{engine}")
    return simulate(SPECS, jobs, pair, 3, SimOptions(noise_sigma=0.0), params or PolicyParams())


def _hits(result: RunResult) -> int:
    return sum(stats.prefix_hit_tokens for stats in result.instances)


FULL_HITS = 150 * 16 * 19  # every row after the first hits all 150 template blocks


def _rows() -> JobSpec:
    # 20 rows of a 2,400-token template: the first row's prefill spans two 2048-token steps.
    return relquery_job("rq", 0.0, 2400, [(40, 2)] * 20, 4, slo_s=60.0)


def test_rows_admitted_together_share_their_template_without_waiting() -> None:
    eager = _run("fcfs/always/chunked", [_rows()])
    waiting = _run("fcfs/prefix-wait/chunked", [_rows()])
    assert _hits(eager) == FULL_HITS  # rows admitted beside the first's last chunk hit what it computes there
    assert [(r.id, r.finish_s) for r in waiting.requests] == [(r.id, r.finish_s) for r in eager.requests]
    assert all(record.outcome.value == "completed" for record in waiting.requests)


@dataclass
class _Seq:
    request: Request
    num_prompt_tokens: int
    num_computed_tokens: int = 0


@dataclass
class _Engine:
    """A cache that holds a prefix only once its prefill ends (SGLang's): ``cached`` tokens per prefix key."""

    running_seqs: list[_Seq]
    waiting: list[_Seq]
    cached: dict[int, int] = field(default_factory=dict)
    now_s: float = 0.0
    spec: object = make_instance("a100-0")  # block_size 16

    def cached_prefix_tokens(self, request: Request) -> int:
        return self.cached.get(request.prefix.shared_key, 0)


def _row(index: int) -> _Seq:
    request = Request(f"rq/{index}", "rq", "rows", "t", 400, 4, 0.0, 0.0, prefix=PrefixId(1, 16, index, 9))
    return _Seq(request, 400)


def test_a_follower_waits_while_its_leader_computes_the_prefix_it_lacks() -> None:
    leader, follower, other = _row(0), _row(1), _Seq(Request("x", "x", "s", "t", 400, 4, 0.0, 0.0), 400)
    leader.num_computed_tokens = 200  # prefilling, the template not cached yet
    engine = _Engine([leader], [follower, other])
    rule = PrefixWait()
    assert rule.holds(follower, engine)
    assert not rule.holds(other, engine)  # no shareable prefix: never held
    engine.now_s, engine.cached[1] = 1.0, 256  # the leader's template is cached: a new pass lets it through
    assert not rule.holds(follower, engine)


def test_a_follower_of_another_group_is_not_held() -> None:
    groups = [("a", 160), ("b", 160)] * 4
    job = relquery_job("rq", 0.0, 64, [(200, 2)] * 8, 4, slo_s=60.0, groups=groups)
    waiting = _run("fcfs/prefix-wait/chunked", [job])
    assert all(record.outcome.value == "completed" for record in waiting.requests)
    # Template (4 blocks) and group (10 blocks) reused by every row after the first of its group.
    assert _hits(waiting) == 16 * (4 * 7 + 10 * 6)


def test_without_shareable_prefixes_the_rule_changes_nothing() -> None:
    job = relquery_job("rq", 0.0, 0, [(300, 3)] * 12, 4, slo_s=60.0)
    plain, waiting = _run("fcfs/always/chunked", [job]), _run("fcfs/prefix-wait/chunked", [job])
    assert [(r.id, r.finish_s) for r in plain.requests] == [(r.id, r.finish_s) for r in waiting.requests]


def test_the_stack_key_turns_the_rule_on_in_its_triage_admission() -> None:
    context = PolicyContext(SPECS, np.random.default_rng(0), HistoryOutputPredictor())
    assert ADMISSIONS.build("triage", {"prefix_wait": True}, context).prefix_wait is not None
    assert ADMISSIONS.build("triage", {}, context).prefix_wait is None
    on = PolicyParams(stack={"slosched": {"prefix_wait": True}})
    options = SimOptions(noise_sigma=0.0)
    result = simulate(SPECS, [_rows()], PolicyPair.parse("slosched"), 3, options, on, "slosched")
    assert _hits(result) == FULL_HITS
