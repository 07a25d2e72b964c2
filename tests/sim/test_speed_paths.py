"""The simulator's fast paths equal the plain computations they replace (sim-speed, issue 17 item 7)."""

from __future__ import annotations

import gc
import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.instance import InstanceSpec
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.core.records import JobRecord
from slosched.core.request import Outcome, Request
from slosched.perf.roofline import RooflineModel
from slosched.sim.cohort import DecodeCohort
from slosched.sim.jobs import JobState, OneStageGraphs
from slosched.sim.kernel import EventKernel
from slosched.sim.noise import NoiseStream
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from slosched.sim.seq import Seq


def test_schedule_all_fires_like_one_schedule_per_event() -> None:
    times = [3.0, 1.0, 1.0, 2.0, 1.0]
    one, many = EventKernel(), EventKernel()
    fired_one: list[int] = []
    fired_many: list[int] = []
    one.schedule(1.0, fired_one.append, -1)
    many.schedule(1.0, fired_many.append, -1)
    for index, time_s in enumerate(times):
        one.schedule(time_s, fired_one.append, index)
    many.schedule_all(times, fired_many.append, list(range(len(times))))
    one.run()
    many.run()
    assert fired_many == fired_one == [-1, 1, 2, 4, 3, 0]
    assert many.num_events == one.num_events == 6


def test_schedule_all_rejects_the_past_and_mismatched_lengths() -> None:
    kernel = EventKernel()
    kernel.schedule(2.0, lambda _: None)
    kernel.run()
    with pytest.raises(ValueError, match="before now"):
        kernel.schedule_all([3.0, 1.0], lambda _: None, [None, None])
    with pytest.raises(ValueError):
        kernel.schedule_all([3.0], lambda _: None, [None, None])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=30), st.integers(0, 2**31))
def test_take_one_draws_the_same_stream_as_take(sizes: list[int], seed: int) -> None:
    grouped = NoiseStream(np.random.default_rng(seed), 0.3)
    single = NoiseStream(np.random.default_rng(seed), 0.3)
    for size in sizes:
        expected = grouped.take(size)
        assert [single.take_one() for _ in range(size)] == expected
    assert NoiseStream(np.random.default_rng(seed), 0.0).take_one() == 1.0


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([1, 4, 16]),
    st.lists(st.tuples(st.integers(1, 200), st.integers(1, 50)), min_size=1, max_size=12),
    st.integers(0, 100),
    st.integers(0, 70),
)
def test_blocks_needed_equals_counting_each_clock(
    block_size: int, members: list[tuple[int, int]], first_clock: int, num_steps: int
) -> None:
    cohort = DecodeCohort(block_size)
    for order, (computed, remaining) in enumerate(members):
        request = Request(str(order), "j", "s", "", computed, 1000, 0.0, 0.0)
        seq = Seq(request, remaining + 1, 0.0, order, computed, num_computed_tokens=computed, num_output_tokens=1)
        cohort.join(seq)
    full, rest = divmod(num_steps, block_size)
    start = first_clock + full * block_size
    expected = full * len(members) + sum(cohort._buckets[-clock % block_size] for clock in range(start, start + rest))
    assert cohort.blocks_needed(first_clock, num_steps) == expected


def test_decode_base_cache_gives_the_computed_floats() -> None:
    truth = RooflineModel.build("A100-80G", "Llama-3-8B")
    for batch in (1, 7, 1, 64, 7):
        assert truth.decode_step_terms(batch)[0] == truth._compute_decode_base_s(batch)
        assert (
            truth.step_time_s(0, 0, batch, 500)
            == truth.decode_step_terms(batch)[0] + (500 + batch) * truth.decode_step_terms(batch)[1]
        )


def test_single_stage_job_state_equals_the_general_graph() -> None:
    stage = StageSpec("answer", (CallSpec(10, 5),))
    spec = JobSpec("j", JobKind.SINGLE, 1.0, (stage,))
    record = JobRecord("j", JobKind.SINGLE, "", 1.0, Outcome.FAILED, 1, 4.0, 1.0)
    fast = JobState.start(spec, record)
    general = JobState.start(
        JobSpec("j", JobKind.SINGLE, 1.0, (stage, StageSpec("tool", (), ("answer",), 1.0))), record
    )
    assert (fast.deadline_s, fast.parents_left, fast.children, fast.stages_left) == (
        5.0,
        {"answer": 0},
        {"answer": []},
        1,
    )
    assert general.parents_left["answer"] == 0 and general.children["answer"] == ["tool"]
    assert [s.name for s in fast.ready_stages()] == ["answer"]
    assert fast.stage_finished("answer") == [] and fast.stages_left == 0


def test_one_stage_jobs_of_a_run_share_their_graph_and_never_change_it() -> None:
    graphs: OneStageGraphs = {}
    specs = [JobSpec(f"j{k}", JobKind.SINGLE, 1.0, (StageSpec("answer", (CallSpec(10, 5),)),)) for k in range(2)]
    states = [
        JobState.start(spec, JobRecord(spec.id, JobKind.SINGLE, "", 1.0, Outcome.FAILED, 1, 4.0, 1.0), graphs)
        for spec in specs
    ]
    assert states[0].parents_left is states[1].parents_left and states[0].children is states[1].children
    assert [s.name for s in states[0].ready_stages()] == ["answer"]
    states[0].calls_left["answer"] = 1
    assert states[0].ready_stages() == [] and [s.name for s in states[1].ready_stages()] == ["answer"]
    assert states[0].stage_finished("answer") == [] and states[0].stages_left == 0
    assert graphs == {"answer": ({"answer": 0}, {"answer": []})}
    assert states[0].view("answer").finished_stages == ("answer",) and states[1].view("answer").finished_stages == ()


@pytest.mark.parametrize("enabled", [True, False])
def test_a_run_restores_the_garbage_collector_state(enabled: bool) -> None:
    spec = InstanceSpec(name="a", gpu="A100-80G", model="Llama-3-8B")
    jobs = [JobSpec(f"j{k}", JobKind.SINGLE, 0.1 * k, (StageSpec("s", (CallSpec(64, 8),)),)) for k in range(5)]
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        result = simulate([spec], jobs, PolicyPair.parse("round-robin+fcfs"), 0, SimOptions())
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
    assert all(record.outcome is Outcome.COMPLETED for record in result.requests)


def test_a_run_promotes_its_objects_but_leaves_a_hosts_frozen_heap_frozen() -> None:
    spec = InstanceSpec(name="a", gpu="A100-80G", model="Llama-3-8B")
    jobs = [JobSpec(f"j{k}", JobKind.SINGLE, 0.1 * k, (StageSpec("s", (CallSpec(64, 8),)),)) for k in range(300)]
    result = simulate([spec], jobs, PolicyPair.parse("round-robin+fcfs"), 0, SimOptions())
    # The run's thousands of tracked objects left the youngest generation, and nothing stays frozen.
    assert len(result.requests) == 300 and len(gc.get_objects(generation=0)) < 300
    assert gc.get_freeze_count() == 0
    gc.freeze()  # as the gateway does at start-up
    try:
        frozen = gc.get_freeze_count()
        simulate([spec], jobs, PolicyPair.parse("round-robin+fcfs"), 0, SimOptions())
        assert gc.get_freeze_count() > frozen // 2  # still frozen (a few may have been freed meanwhile)
    finally:
        gc.unfreeze()


def test_positional_constructions_match_the_field_order() -> None:
    """``completed_record``, ``_new_job_record``, ``_new_request`` and ``BeliefFeed.flush`` pass fields by
    position (for speed): a reordered dataclass must fail here, not silently swap values."""
    from dataclasses import fields

    from slosched.core.belief import StepObservation
    from slosched.core.records import RequestRecord
    from slosched.core.views import JobView

    def names(cls: type) -> list[str]:
        return [f.name for f in fields(cls)]

    assert names(RequestRecord)[:17] == [
        "id",
        "job_id",
        "stage",
        "instance",
        "arrival_s",
        "prompt_tokens",
        "output_tokens",
        "outcome",
        "reason",
        "first_scheduled_s",
        "first_token_s",
        "finish_s",
        "cached_tokens",
        "num_preemptions",
        "deadline_s",
        "ttft_slo_s",
        "tpot_slo_s",
    ]
    assert names(JobRecord)[:8] == [
        "id",
        "kind",
        "template",
        "arrival_s",
        "outcome",
        "num_requests",
        "slo_s",
        "no_contention_s",
    ]
    assert names(Request)[:12] == [
        "id",
        "job_id",
        "stage",
        "template",
        "prompt_tokens",
        "max_output_tokens",
        "arrival_s",
        "job_arrival_s",
        "deadline_s",
        "tenant",
        "session_id",
        "prefix",
    ]
    assert names(StepObservation) == [
        "num_prefill_tokens",
        "prefill_context_tokens",
        "num_decode_seqs",
        "decode_context_tokens",
        "durations_s",
    ]
    assert names(JobView) == [
        "id",
        "kind",
        "template",
        "arrival_s",
        "slo_s",
        "deadline_s",
        "stage",
        "finished_stages",
    ]
    # A plain class (compiled, its own ``__init__`` is compiled too): ``JobState.start`` follows its parameters.
    assert list(inspect.signature(JobState).parameters) == [
        "spec",
        "record",
        "deadline_s",
        "parents_left",
        "children",
        "stages",
        "stages_left",
    ]
