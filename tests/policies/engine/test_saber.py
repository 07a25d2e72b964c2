"""SABER engine parts on hand-built views: tiers, demotion, admission, low queue, determinism."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.perf.speed_models import UslSpeedModel
from slosched.policies.engine.admission.saber_speed import SaberAdmission
from slosched.policies.engine.admission.static_concurrency import StaticConcurrencyAdmission
from slosched.policies.engine.base import ENGINE_PRESETS
from slosched.policies.engine.ordering.saber_speed_math import required_speed
from slosched.policies.engine.ordering.saber_tiers import HIGH, LOW, SaberOrdering, window_permuted, windowed_shuffle
from slosched.policies.registry import PolicyContext
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, PolicyParams, simulate
from tests.conftest import make_instance, make_jobs

MODEL = UslSpeedModel(lam=100.0, sigma=0.05, kappa=1e-4)
SPEC = InstanceSpec(name="i", gpu="H100", model="Qwen2.5-Coder-7B")


@dataclass
class FakeSeq:
    request: Request
    num_output_tokens: int = 0


@dataclass
class FakeEngine:
    now_s: float
    waiting: list[FakeSeq] = field(default_factory=list)
    running: list[FakeSeq] = field(default_factory=list)
    spec: InstanceSpec = SPEC

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def running_seqs(self) -> list[FakeSeq]:
        return self.running


def seq(name: str, max_tokens: int, deadline_s: float, arrival_s: float = 0.0, generated: int = 0) -> FakeSeq:
    request = Request(name, name, "s", "t", 100, max_tokens, arrival_s, arrival_s, deadline_s=deadline_s)
    return FakeSeq(request, generated)


def ordering(window: int = 1, seed: int = 0, scan: str = "random") -> SaberOrdering:
    return SaberOrdering(MODEL, window, np.random.default_rng(seed), "deadline", "max_tokens", scan)


def test_required_speed_uses_remaining_max_tokens_and_time() -> None:
    assert required_speed(seq("a", 100, 10.0, generated=20), 2.0, "max_tokens") == pytest.approx(80 / 8)
    assert required_speed(seq("a", 100, 10.0), 10.0, "max_tokens") == math.inf
    assert required_speed(seq("a", 100, math.inf), 5.0, "max_tokens") == 0.0


def test_demotion_happens_exactly_when_required_speed_passes_f1() -> None:
    # 100 tokens, f(1) = 100 tokens/s: feasible while at least 1 s remains before the deadline.
    waiting = seq("a", 100, deadline_s=10.0)
    order = ordering()
    for now, tier in ((8.0, HIGH), (9.0, HIGH), (9.0 + 1e-9, LOW), (9.5, LOW), (11.0, LOW)):
        engine = FakeEngine(now, [waiting])
        assert order.key(waiting, engine)[0] == tier, now
        assert order.is_high(waiting, now) == (tier == HIGH)


def test_high_tier_sorted_by_deadline_before_low_tier() -> None:
    late = seq("late", 100, deadline_s=1.5)  # needs 200 tok/s at t=1: demoted
    soon = seq("soon", 10, deadline_s=3.0)
    later = seq("later", 10, deadline_s=9.0)
    engine = FakeEngine(1.0, [later, late, soon])
    keys = {s.request.id: ordering().key(s, engine) for s in engine.waiting}
    assert sorted(keys, key=keys.__getitem__) == ["soon", "later", "late"]


def test_windowed_shuffle_picks_within_the_window_and_is_seeded() -> None:
    items = list(range(20))
    assert windowed_shuffle(items, 1, np.random.default_rng(0).random(20)) == items
    for seed in range(20):
        picked = windowed_shuffle(items, 3, np.random.default_rng(seed).random(20))
        assert sorted(picked) == items
        remaining = list(items)
        for value in picked:  # every pick is one of the first 3 still waiting
            assert value in remaining[:3]
            remaining.remove(value)
    first = [windowed_shuffle(items, 4, np.random.default_rng(s).random(20))[0] for s in range(40)]
    assert set(first) == {0, 1, 2, 3}


def _admit(admission: SaberAdmission, engine: FakeEngine) -> list[str]:
    return [s.request.id for s in engine.waiting if admission.admit(s, engine)]


def test_admission_respects_every_running_requirement() -> None:
    admission = SaberAdmission(MODEL, "max_tokens")
    for num_running in (1, 3, 8):
        for need in (20.0, 50.0, 80.0, 95.0):
            running = [seq(f"r{i}", 1000, 1000.0) for i in range(num_running - 1)]
            running.append(seq("tight", int(need * 10), 10.0))  # needs `need` tok/s at t=0
            candidate = seq("c", 1, 1000.0)
            engine = FakeEngine(0.0, [candidate], running)
            admitted = _admit(admission, engine) == ["c"]
            assert admitted == (MODEL.speed(num_running + 1.0) >= need), (num_running, need)


def test_admission_checks_the_candidate_and_counts_this_pass() -> None:
    admission = SaberAdmission(MODEL, "max_tokens", window=30)
    # f(L+1) >= 60 holds up to L+1 = 6 (f(6) = 100 / 1.253 ~ 79.8; f(8) ~ 73.5; f(12) ~ 62.6; f(13) ~ 60.1).
    limit = max(n for n in range(1, 200) if MODEL.speed(float(n)) >= 60.0)
    candidates = [seq(f"c{i}", 60, 1.0 + 1e-6 * i) for i in range(30)]
    engine = FakeEngine(0.0, candidates)
    assert len(_admit(admission, engine)) == limit
    # A lost-cause running request (required speed above f(1)) constrains nobody.
    engine = FakeEngine(0.0, [seq("c", 1, 100.0)], [seq("lost", 1000, 1.0)])
    assert _admit(admission, engine) == ["c"]


def test_low_queue_is_served_only_when_the_high_queue_is_empty() -> None:
    admission = SaberAdmission(MODEL, "max_tokens")
    low = seq("low", 500, deadline_s=2.0)  # 250 tok/s needed: demoted
    high_ok = seq("ok", 10, deadline_s=100.0)
    assert _admit(admission, FakeEngine(0.0, [high_ok, low])) == ["ok", "low"]
    # A high request that does not fit (50 running make f(51) < 90 tok/s) keeps the low one out.
    running = [seq(f"r{i}", 10, 1000.0) for i in range(50)]
    high_blocked = seq("blocked", 90, deadline_s=1.0)
    assert _admit(admission, FakeEngine(0.0, [high_blocked, low], running)) == []
    assert _admit(admission, FakeEngine(0.0, [low], running)) == ["low"]


def test_static_concurrency_counts_admissions_within_a_pass() -> None:
    admission = StaticConcurrencyAdmission(cap=5)
    engine = FakeEngine(0.0, [seq(f"w{i}", 10, 10.0) for i in range(10)], [seq("r", 10, 10.0)] * 2)
    assert len(_admit(admission, engine)) == 3


def _context() -> PolicyContext:
    return PolicyContext(instances=(), rng=np.random.default_rng(0), output_predictor=HistoryOutputPredictor())


def test_presets_reject_bad_parameters() -> None:
    with pytest.raises(ConfigError, match=r"give exactly one"):
        ENGINE_PRESETS.build("saber", {}, _context())
    speed = dataclasses.asdict(MODEL)
    with pytest.raises(ConfigError, match=r"saber.window"):
        ENGINE_PRESETS.build("saber", {"speed": speed, "window": 0}, _context())
    with pytest.raises(ConfigError, match=r"saber.order.*allowed"):
        ENGINE_PRESETS.build("saber", {"speed": speed, "order": "random"}, _context())
    with pytest.raises(ConfigError, match=r"unknown parameter 'cap'"):
        ENGINE_PRESETS.build("saber", {"speed": speed, "cap": 3}, _context())
    with pytest.raises(ConfigError, match=r"static-concurrency.cap"):
        ENGINE_PRESETS.build("static-concurrency", {}, _context())
    with pytest.raises(ConfigError, match=r"must be >= 1"):
        ENGINE_PRESETS.build("static-concurrency", {"cap": 0}, _context())


def _run(engine: str, params: dict[str, object], seed: int) -> list[tuple[object, ...]]:
    jobs = [dataclasses.replace(job, slo_s=6.0) for job in make_jobs(60, rate=8.0, seed=3)]
    result = simulate(
        [make_instance(gpu="H100", max_running=256)],
        jobs,
        PolicyPair("round-robin", engine),
        seed,
        SimOptions(),
        PolicyParams(engine={engine: params}),
    )
    return [dataclasses.astuple(record) for record in result.requests]


def test_saber_runs_are_deterministic_by_seed_and_complete_everything() -> None:
    params = {"speed": dataclasses.asdict(MODEL), "window": 4}
    first = _run("saber", params, seed=5)
    assert first == _run("saber", params, seed=5)
    assert len(first) == 60 and all(record[7] == "completed" for record in first)
    capped = _run("static-concurrency", {"cap": 4}, seed=5)
    assert capped == _run("static-concurrency", {"cap": 4}, seed=5)


def test_scan_first_a_deferred_high_request_ends_the_high_queues_turn() -> None:
    # The earlier reading (scan "first"): the picked request stays queued and the pass stops, so a
    # smaller one behind it waits for the next pass.
    admission = SaberAdmission(MODEL, "max_tokens", scan="first")
    running = [seq(f"r{i}", 10, 1000.0) for i in range(10)]
    engine = FakeEngine(0.0, [seq("big", 95, 1.0), seq("small", 1, 1000.0)], running)
    assert _admit(admission, engine) == []
    engine = FakeEngine(0.5, [seq("small", 1, 1000.0)], running)
    assert _admit(admission, engine) == ["small"]


@pytest.mark.parametrize("scan", ["random", "queue"])
def test_window_scan_admits_past_an_infeasible_head(scan: str) -> None:
    # Algorithm 1: every window candidate is tested; the infeasible head stays queued, the rest get in.
    admission = SaberAdmission(MODEL, "max_tokens", window=5, scan=scan)
    running = [seq(f"r{i}", 10, 1000.0) for i in range(10)]
    waiting = [seq("big", 95, 1.0)] + [seq(f"small{i}", 1, 1000.0 + i) for i in range(3)]
    assert _admit(admission, FakeEngine(0.0, waiting, running)) == ["small0", "small1", "small2"]
    # A low (demoted) request still waits while the high queue holds the deferred head.
    low = seq("low", 500, deadline_s=2.0)
    assert _admit(admission, FakeEngine(0.0, [*waiting, low], running)) == ["small0", "small1", "small2"]


def test_window_scan_leaves_requests_beyond_the_window_for_the_next_pass() -> None:
    admission = SaberAdmission(MODEL, "max_tokens", window=3)
    waiting = [seq(f"w{i}", 1, 1000.0 + i) for i in range(6)]
    low = seq("low", 500, deadline_s=0.5)
    assert _admit(admission, FakeEngine(0.0, [*waiting, low])) == ["w0", "w1", "w2"]
    assert _admit(admission, FakeEngine(0.1, [*waiting[3:], low])) == ["w3", "w4", "w5", "low"]


def test_random_scan_permutes_exactly_the_window_and_is_seeded() -> None:
    items = list(range(10))
    heads = set()
    for seed in range(30):
        picked = window_permuted(items, 4, np.random.default_rng(seed))
        assert sorted(picked[:4]) == [0, 1, 2, 3] and picked[4:] == items[4:]
        assert picked == window_permuted(items, 4, np.random.default_rng(seed))
        heads.add(picked[0])
    assert heads == {0, 1, 2, 3}
    waiting = [seq(f"w{i}", 10, 10.0 + i) for i in range(6)]
    engine = FakeEngine(0.0, waiting)
    queue = ordering(window=4, scan="queue")
    assert [queue.key(s, engine) for s in waiting] == [(HIGH, i) for i in range(6)]
    shuffled = ordering(window=4, seed=1, scan="random")
    positions = [shuffled.key(s, engine)[1] for s in waiting]
    assert sorted(positions[:4]) == [0, 1, 2, 3] and positions[4:] == [4, 5]


def test_window_scan_runs_are_deterministic_and_scans_differ_from_first() -> None:
    runs = {}
    for scan in ("random", "queue", "first"):
        params = {"speed": dataclasses.asdict(MODEL), "window": 4, "scan": scan}
        runs[scan] = _run("saber", params, seed=5)
        assert runs[scan] == _run("saber", params, seed=5)
        assert all(record[7] == "completed" for record in runs[scan])
    assert runs["random"] != runs["first"] and runs["queue"] != runs["first"]
    with pytest.raises(ConfigError, match=r"saber.scan.*allowed"):
        ENGINE_PRESETS.build("saber", {"speed": dataclasses.asdict(MODEL), "scan": "all"}, _context())
