"""The Adaptive Batch Arranger's cases, its latency-delta rule, the ablations and admission."""

from __future__ import annotations

import pytest

from slosched.core.errors import ConfigError
from slosched.core.views import StepMode
from slosched.policies.engine.batching.relserve_arranger import AdaptiveBatchArranger, SingleJobAdmission
from slosched.policies.engine.ordering.relserve_priority import DynamicPriorityUpdater
from slosched.policies.engine.presets.relserve import RelserveParams, build_relserve
from tests.policies.engine.relserve_fakes import FakeEngine, FixedLines, make_rows, running, spec


def arranger(tail_rule: str = "delta", mixed: bool = True, output_length: str = "limit") -> AdaptiveBatchArranger:
    dpu = DynamicPriorityUpdater(FixedLines(0.001, 0.01, 0.002, 0.02), 4, None)
    return AdaptiveBatchArranger(dpu, tail_rule, mixed, output_length)


def tail_engine(num_waiting_jobs: int) -> FakeEngine:
    """A nearly finished running job "a" (2 decode steps left) and longer waiting jobs."""
    waiting = [seq for index in range(num_waiting_jobs) for seq in make_rows(f"w{index:02d}", 10)]
    return FakeEngine(spec(), running_seqs=running(make_rows("a", 1), generated=2), waiting=waiting)


def test_decodes_when_nothing_waits_and_prefills_an_idle_engine() -> None:
    aba = arranger()
    engine = FakeEngine(spec(), running_seqs=running(make_rows("a", 2)))
    assert aba.plan(engine).mode is StepMode.DECODE_ONLY and aba.last_case == "decode-nothing-waits"
    idle = FakeEngine(spec(), waiting=make_rows("b", 2))
    assert aba.plan(idle).mode is StepMode.MIXED and aba.last_case == "prefill-idle"
    assert arranger(mixed=False).plan(idle).mode is StepMode.PREFILL_ONLY


def test_a_shorter_waiting_job_preempts() -> None:
    long_running = running(make_rows("a", 8, predicted=9.0), generated=1)
    engine = FakeEngine(spec(), running_seqs=long_running, waiting=make_rows("b", 1))
    aba = arranger()
    assert aba.decide(engine) and aba.last_case == "prefill-shorter"
    assert aba.chosen_job == "b"


def test_same_job_keeps_prefilling_to_widen_its_decode() -> None:
    rows = make_rows("a", 6)
    engine = FakeEngine(spec(), running_seqs=running(rows[:2]), waiting=rows[2:])
    aba = arranger()
    assert aba.decide(engine) and aba.last_case == "prefill-same"


def test_latency_delta_matches_the_hand_computed_rule() -> None:
    engine = tail_engine(1)
    aba = arranger()
    assert not aba.decide(engine) and aba.last_case == "tail-delta-decode"
    # Candidate: 5 rows (1000-token budget / 200); OL = the output limit, 10 for "a" and for the candidate.
    candidate = aba.prefill_candidate(engine, "w00")
    assert candidate is not None and (candidate.num_requests, candidate.uncached_tokens) == (5, 1000)
    assert candidate.output_tokens == 10
    prefill_beyond_decode = (0.001 * 1000 + 0.01) - (0.002 * 1 + 0.02)
    d_plus = prefill_beyond_decode * 1 + 0.002 * 5 * min(10, 10)
    d_minus = 1 * 0.02 * min(10, 10)
    assert aba.latency_delta_s(engine, candidate, aba.dpu.running_by_job) == pytest.approx(d_plus - d_minus)
    separate = arranger(mixed=False)
    separate.decide(engine)
    d_plus_separate = (0.001 * 1000 + 0.01) + 0.002 * 5 * 10
    got = separate.latency_delta_s(engine, candidate, separate.dpu.running_by_job)
    assert got == pytest.approx(d_plus_separate - d_minus)


def test_predicted_output_variant_uses_the_remaining_belief() -> None:
    engine = tail_engine(1)
    aba = arranger(output_length="predicted")
    aba.decide(engine)
    # OL = predicted output within the limit: 4 for the candidate, 4 - 2 generated = 2 for "a".
    candidate = aba.prefill_candidate(engine, "w00")
    assert candidate is not None and candidate.output_tokens == 4
    prefill_beyond_decode = (0.001 * 1000 + 0.01) - (0.002 * 1 + 0.02)
    d_plus = prefill_beyond_decode * 1 + 0.002 * 5 * min(2, 4)
    d_minus = 1 * 0.02 * min(4, 2)
    assert aba.latency_delta_s(engine, candidate, aba.dpu.running_by_job) == pytest.approx(d_plus - d_minus)


def test_output_limit_prefills_where_the_predicted_output_would_decode() -> None:
    # 8 waiting jobs: D- = 8 * bd * OL outweighs the prefill with OL = 10 (limit), not with OL = 2 (belief).
    paper = arranger()
    assert paper.decide(tail_engine(8)) and paper.last_case == "tail-delta-prefill"
    predicted = arranger(output_length="predicted")
    assert not predicted.decide(tail_engine(8)) and predicted.last_case == "tail-delta-decode"


def test_unknown_output_length_is_rejected() -> None:
    with pytest.raises(ValueError, match="output_length"):
        arranger(output_length="truth")


def test_many_waiting_jobs_make_deferring_costlier_than_prefilling() -> None:
    aba = arranger()
    assert aba.decide(tail_engine(30)) and aba.last_case == "tail-delta-prefill"


@pytest.mark.parametrize(("rule", "prefill"), [("prefill", True), ("decode", False)])
def test_ablations_fix_the_tail_choice(rule: str, prefill: bool) -> None:
    for jobs in (1, 30):
        aba = arranger(rule)
        assert aba.decide(tail_engine(jobs)) is prefill and aba.last_case == f"tail-{rule}"


def test_decodes_when_the_prefill_cannot_start() -> None:
    full = FakeEngine(spec(max_running=2), running_seqs=running(make_rows("a", 2)), waiting=make_rows("b", 1))
    aba = arranger()
    assert not aba.decide(full) and aba.last_case == "decode-no-room"
    no_kv = FakeEngine(spec(), running_seqs=running(make_rows("a", 2)), waiting=make_rows("b", 1))
    no_kv.num_free_kv_blocks = 3
    assert not aba.decide(no_kv) and aba.last_case == "decode-no-room"


def test_a_prefill_that_admitted_nothing_is_followed_by_decode() -> None:
    engine = FakeEngine(spec(), running_seqs=running(make_rows("a", 2, 200, 50, 40.0)), waiting=make_rows("b", 1))
    aba = arranger()
    assert aba.plan(engine).mode is StepMode.MIXED
    engine.now_s += 0.01  # the retry: nothing changed
    assert aba.plan(engine).mode is StepMode.DECODE_ONLY and aba.last_case == "decode-prefill-stalled"
    assert aba.dpu.meter.num_iterations == 2


def test_admission_takes_only_the_chosen_job() -> None:
    aba = arranger()
    admission = SingleJobAdmission(aba)
    engine = FakeEngine(spec(), waiting=[*make_rows("b", 1), *make_rows("c", 3)])
    aba.decide(engine)
    assert aba.chosen_job == "b"
    assert [admission.admit(seq, engine) for seq in engine.waiting] == [True, False, False, False]


def test_preset_takes_the_output_length_and_defaults_to_the_limit() -> None:
    default = build_relserve("relserve", "delta", RelserveParams()).batching
    predicted = build_relserve("relserve", "delta", RelserveParams(output_length="predicted")).batching
    assert isinstance(default, AdaptiveBatchArranger) and default.output_length == "limit"
    assert isinstance(predicted, AdaptiveBatchArranger) and predicted.output_length == "predicted"
    with pytest.raises(ConfigError, match=r"relserve\.output_length"):
        RelserveParams(output_length="truth")
