"""Admission ``prefix-wait`` (and the stack's ``prefix_wait`` key): calls admitted together that share an uncached
prefix compute it once; without a shareable prefix nothing changes."""

from __future__ import annotations

from slosched.core.job import JobSpec
from slosched.core.records import RunResult
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
    # 20 rows of a 2,400-token template: the first row's prefill spans two 2048-token steps, and rows that
    # join it in the second step find nothing cached yet.
    return relquery_job("rq", 0.0, 2400, [(40, 2)] * 20, 4, slo_s=60.0)


def test_rows_admitted_together_compute_their_template_once() -> None:
    eager = _run("fcfs/always/chunked", [_rows()])
    waiting = _run("fcfs/prefix-wait/chunked", [_rows()])
    assert _hits(eager) < FULL_HITS  # some rows recomputed the template beside the first
    assert _hits(waiting) == FULL_HITS
    assert all(record.outcome.value == "completed" for record in waiting.requests)


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
    on = PolicyParams(stack={"slosched": {"prefix_wait": True}})
    options = SimOptions(noise_sigma=0.0)
    result = simulate(SPECS, [_rows()], PolicyPair.parse("slosched"), 3, options, on, "slosched")
    default = simulate(SPECS, [_rows()], PolicyPair.parse("slosched"), 3, options, PolicyParams(), "slosched")
    assert _hits(result) == FULL_HITS > _hits(default)
