"""Baseline routers on hand-built instance views."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from slosched.core.request import Request
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.cluster.routers.least_loaded import LeastLoadedRouter
from slosched.policies.cluster.routers.least_tokens import LeastTokensRouter
from slosched.policies.cluster.routers.random import RandomRouter
from slosched.policies.cluster.routers.round_robin import RoundRobinRouter
from slosched.sim.views import InstanceSnapshot
from tests.conftest import make_instance


@dataclass
class _Load:
    running: int = 0
    waiting: int = 0
    prefill: int = 0
    decode: float = 0.0
    extra: dict = field(default_factory=dict)


def _views(*loads: _Load) -> list[InstanceSnapshot]:
    return [
        InstanceSnapshot(
            index=i,
            spec=make_instance(f"i{i}"),
            snapshot_s=0.0,
            num_running=load.running,
            num_waiting=load.waiting,
            waiting_prefill_tokens=load.prefill,
            outstanding_decode_tokens=load.decode,
            num_free_kv_blocks=100,
            num_kv_blocks=100,
            step_predictor=LinearStepPredictor(),
        )
        for i, load in enumerate(loads)
    ]


REQUEST = Request(
    id="r",
    job_id="j",
    stage="s",
    template="t",
    prompt_tokens=10,
    max_output_tokens=10,
    arrival_s=0.0,
    job_arrival_s=0.0,
)


def test_round_robin_cycles_and_skips_missing_instances() -> None:
    router = RoundRobinRouter(3)
    views = _views(_Load(), _Load(), _Load())
    assert [views[router.route(REQUEST, views, 0.0)].index for _ in range(4)] == [0, 1, 2, 0]
    feasible = [views[0], views[2]]  # instance 1 cannot serve this request
    assert feasible[router.route(REQUEST, feasible, 0.0)].index == 2


def test_least_loaded_counts_running_and_waiting() -> None:
    views = _views(_Load(running=3), _Load(running=1, waiting=1), _Load(running=2, waiting=2))
    assert LeastLoadedRouter().route(REQUEST, views, 0.0) == 1


def test_least_tokens_counts_prefill_and_predicted_decode() -> None:
    views = _views(_Load(prefill=1000, decode=10), _Load(prefill=100, decode=2000), _Load(prefill=600, decode=300))
    assert LeastTokensRouter().route(REQUEST, views, 0.0) == 2


def test_ties_go_to_the_lowest_index() -> None:
    assert LeastLoadedRouter().route(REQUEST, _views(_Load(), _Load()), 0.0) == 0


def test_random_is_seeded() -> None:
    views = _views(_Load(), _Load(), _Load(), _Load())
    first = [RandomRouter(np.random.default_rng(5)).route(REQUEST, views, 0.0) for _ in range(1)]
    router_a, router_b = RandomRouter(np.random.default_rng(5)), RandomRouter(np.random.default_rng(5))
    picks_a = [router_a.route(REQUEST, views, 0.0) for _ in range(20)]
    picks_b = [router_b.route(REQUEST, views, 0.0) for _ in range(20)]
    assert picks_a == picks_b and picks_a[0] == first[0] and len(set(picks_a)) > 1


def test_cache_aware_trees_match_a_relquery_rows_group_after_its_template() -> None:
    from slosched.core.request import PrefixId
    from slosched.policies.cluster.routers.cache_aware import PrefixTree

    def row(group_key: int, group_blocks: int) -> Request:
        prefix = PrefixId(7, 2, 1, 1, group_key=group_key, group_blocks=group_blocks)
        return Request("r", "j", "rows", "relquery", 16 * prefix.num_blocks + 1, 4, 0.0, 0.0, prefix=prefix)

    tree = PrefixTree()
    tree.insert(row(9, 3), max_blocks=100)
    assert tree.match_blocks(row(9, 3)) == 5  # template and group
    assert tree.match_blocks(row(11, 3)) == 2  # another group: the template only
    assert tree.num_blocks == 5
    without_template = Request("r", "j", "rows", "relquery", 100, 4, 0.0, 0.0, prefix=PrefixId(8, 2, 1, 1, 9, 3))
    assert tree.match_blocks(without_template) == 0  # a group is reached only through its template
