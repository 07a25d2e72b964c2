"""Router ``cache-aware``: prefix-cache affinity unless the load is imbalanced, the default policy of
SGLang's router (sgl-model-gateway) and of vllm-router.

Load is the number of requests running or queued at an instance (the unit SGLang's thresholds are stated
in). The load is *imbalanced* when ``max - min > balance_abs_threshold`` and
``max > balance_rel_threshold * min``; then the least loaded instance wins. Otherwise the instance with the
longest prefix match wins, provided the match covers at least ``cache_threshold`` of the prompt; below that
(or among instances tied on the match) the least loaded wins. Least loaded ties go to fewer outstanding
tokens, then to the lowest position, so the result is deterministic.

A prefix match on an instance is the larger of what its cache holds now
(``InstanceView.cached_prefix_tokens``) and what this router sent there recently: a small approximate
prefix tree per instance, keyed by the request's shared prefix (``PrefixId.shared_key``: a template, a
session's earlier turns, then ``group_key``: the rows of a relQuery with the same leading fields) with the
longest run of shared blocks routed there. The tree is what SGLang's
router keeps (it never sees the engines' caches); here it also covers requests routed but not prefilled
yet, so a burst of one template goes to one instance instead of being spread before the first lands. The
tree of an instance holds at most as many tokens as its KV cache, least recently routed prefixes evicted
first (SGLang bounds its tree by size and evicts LRU periodically; evicting on insert is the same bound,
kept continuously). Where a runtime's views cannot see the engine's cache (the gateway's return 0), the
tree alone decides. Defaults are SGLang's documented router defaults: ``cache_threshold`` 0.3,
``balance_abs_threshold`` 64, ``balance_rel_threshold`` 1.5.

Deviation, on purpose: below the cache threshold SGLang picks the instance with the smallest tree (most
room to cache); this router picks the least loaded, which is what a skeptic would call the stronger
baseline when instances differ in speed.

A profile: the ``cache-affinity`` filter (keeps the candidates with the longest prefix match when the load
is balanced and the match reaches ``cache_threshold``, else all; it owns the prefix trees, updated in
``on_routed``) and the ``least-loaded`` scorer with ``tie_break: tokens`` under the max picker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pickers import MaxPicker
from slosched.policies.cluster.pipeline import FILTERS, Cycle, Profile, WeightedScorer
from slosched.policies.cluster.scorers import LeastLoadedScorer, request_load
from slosched.policies.registry import PolicyContext, setting


@dataclass(slots=True)
class PrefixTree:
    """Shared prefixes recently routed to one instance: key -> number of leading blocks, in LRU order
    (a dict keeps insertion order, and a touched key is re-inserted at the end)."""

    blocks: dict[int, int] = field(default_factory=dict)
    num_blocks: int = 0

    def match_blocks(self, request: Request) -> int:
        prefix = request.prefix
        if prefix.shared_blocks <= 0 and prefix.group_blocks <= 0:
            return 0
        held = min(self.blocks.get(prefix.shared_key, 0), prefix.shared_blocks)
        if held < prefix.shared_blocks or prefix.group_blocks <= 0:
            return held
        # The group's blocks follow the key's: a tree holds them only after the key's (a prefix tree's path).
        return held + min(self.blocks.get(prefix.group_key, 0), prefix.group_blocks)

    def insert(self, request: Request, max_blocks: int) -> None:
        prefix = request.prefix
        if prefix.shared_blocks <= 0 and prefix.group_blocks <= 0:
            return
        if prefix.shared_blocks > 0:
            self._touch(prefix.shared_key, prefix.shared_blocks)
        if prefix.group_blocks > 0:
            self._touch(prefix.group_key, prefix.group_blocks)
        while self.num_blocks > max_blocks and len(self.blocks) > 1:
            oldest = next(iter(self.blocks))
            self.num_blocks -= self.blocks.pop(oldest)

    def _touch(self, key: int, blocks: int) -> None:
        held = self.blocks.pop(key, 0)
        self.blocks[key] = max(held, blocks)
        self.num_blocks += max(held, blocks) - held


class CacheAffinityFilter:
    def __init__(
        self, cache_threshold: float = 0.3, balance_abs_threshold: float = 64.0, balance_rel_threshold: float = 1.5
    ) -> None:
        self.cache_threshold = cache_threshold
        self.balance_abs_threshold = balance_abs_threshold
        self.balance_rel_threshold = balance_rel_threshold
        self._trees: dict[int, PrefixTree] = {}

    def is_imbalanced(self, instances: Sequence[InstanceView]) -> bool:
        loads = [request_load(instance) for instance in instances]
        low, high = min(loads), max(loads)
        return high - low > self.balance_abs_threshold and high > self.balance_rel_threshold * low

    def match_tokens(self, request: Request, instance: InstanceView) -> int:
        """Prompt tokens expected to hit the prefix cache of ``instance`` (cached now or routed recently)."""
        tree = self._trees.get(instance.index)
        routed = tree.match_blocks(request) * instance.spec.block_size if tree is not None else 0
        return min(max(instance.cached_prefix_tokens(request), routed), request.prompt_tokens)

    def filter(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[int]:
        everyone = list(range(len(views)))
        if len(views) == 1 or self.is_imbalanced(views):
            return everyone
        request = cycle.request
        matches = [self.match_tokens(request, view) for view in views]
        best = max(matches)
        if best <= 0 or best < self.cache_threshold * request.prompt_tokens:
            return everyone
        return [position for position in everyone if matches[position] == best]

    def on_routed(self, cycle: Cycle, view: InstanceView) -> None:
        tree = self._trees.get(view.index)
        if tree is None:
            tree = self._trees[view.index] = PrefixTree()
        tree.insert(cycle.request, max(view.num_kv_blocks, 1))


class CacheAwareRouter(Profile):
    def __init__(
        self, cache_threshold: float = 0.3, balance_abs_threshold: float = 64.0, balance_rel_threshold: float = 1.5
    ) -> None:
        self.affinity = CacheAffinityFilter(cache_threshold, balance_abs_threshold, balance_rel_threshold)
        scorer = WeightedScorer("least-loaded", LeastLoadedScorer(tie_break="tokens"))
        super().__init__([self.affinity], [scorer], MaxPicker())

    @property
    def balance_abs_threshold(self) -> float:
        return self.affinity.balance_abs_threshold


@dataclass(frozen=True, slots=True)
class CacheAffinityParams:
    cache_threshold: float = setting(0.3, "least matched share of the prompt that makes an instance home, in [0, 1]")
    balance_abs_threshold: float = setting(64.0, "load gap (requests) above which the home is left (>= 0)")
    balance_rel_threshold: float = setting(1.5, "load ratio above which the home is left (>= 1)")

    def __post_init__(self) -> None:
        if not 0.0 <= self.cache_threshold <= 1.0:
            raise ConfigError("cache-affinity.cache_threshold", f"must be in [0, 1], got {self.cache_threshold}")
        if not self.balance_abs_threshold >= 0:
            raise ConfigError("cache-affinity.balance_abs_threshold", f"must be >= 0, got {self.balance_abs_threshold}")
        if not self.balance_rel_threshold >= 1.0:
            raise ConfigError("cache-affinity.balance_rel_threshold", f"must be >= 1, got {self.balance_rel_threshold}")


@FILTERS.register("cache-affinity", params=CacheAffinityParams)
def build_filter(params: CacheAffinityParams, context: PolicyContext) -> CacheAffinityFilter:
    return CacheAffinityFilter(params.cache_threshold, params.balance_abs_threshold, params.balance_rel_threshold)


@ROUTERS.register("cache-aware", params=CacheAffinityParams)
def build(params: CacheAffinityParams, context: PolicyContext) -> CacheAwareRouter:
    return CacheAwareRouter(params.cache_threshold, params.balance_abs_threshold, params.balance_rel_threshold)
