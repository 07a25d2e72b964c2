"""Load and affinity scorers every profile can use, and the ``kv-fits`` filter.

* scorer ``least-tokens``: fewest outstanding tokens (queued prefill + predicted remaining decode),
  min-max normalised. No parameters.
* scorer ``least-loaded``: fewest requests running or queued, min-max normalised. ``tie_break``: ``none``
  (default) or ``tokens`` (equal loads ordered by outstanding tokens; rank-normalised).
* scorer ``session-affinity``: 1 on the instance this scorer last saw the request's session routed to,
  ``miss_score`` (default 0) elsewhere; when no candidate is home every candidate gets 1 (0 when
  ``miss_score`` is 0), so sessionless requests are not scaled.
* filter ``kv-fits``: instances whose free KV holds the prompt plus the predicted output; all when none
  does. No parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.core.views import InstanceView
from slosched.policies.cluster.pipeline import FILTERS, SCORERS, Cycle, Key, RankedScorer, keep_or_all
from slosched.policies.registry import NoParams, PolicyContext, setting

TIE_BREAKS = ("none", "tokens")


def outstanding_tokens(instance: InstanceView) -> float:
    """Queued prefill plus predicted remaining decode tokens: the load ``least-tokens`` minimises."""
    return instance.waiting_prefill_tokens + instance.outstanding_decode_tokens


def request_load(instance: InstanceView) -> int:
    """Requests running or queued at the instance."""
    return instance.num_running + instance.num_waiting


class LeastTokensScorer(RankedScorer):
    def keys(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[Key]:
        return [view.waiting_prefill_tokens + view.outstanding_decode_tokens for view in views]


class LeastLoadedScorer(RankedScorer):
    def __init__(self, tie_break: str = "none") -> None:
        if tie_break not in TIE_BREAKS:
            raise ConfigError("scorer least-loaded.tie_break", f"expected one of {TIE_BREAKS}, got {tie_break!r}")
        self.lexicographic = tie_break == "tokens"

    def keys(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[Key]:
        if self.lexicographic:
            return [(float(request_load(view)), outstanding_tokens(view)) for view in views]
        # Integer counts order and normalise (``min_max``) exactly as their floats, without a float() per view.
        return [view.num_running + view.num_waiting for view in views]


class SessionAffinityScorer:
    """1 on the session's home (where this scorer last saw it routed), ``miss_score`` elsewhere, divided by
    the best candidate's raw score so the best gets 1; all ``miss_score`` / ``miss_score`` = 1 (or all 0
    when ``miss_score`` is 0) when no candidate is home, so a sessionless request is not scaled at all."""

    def __init__(self, miss_score: float = 0.0) -> None:
        if not 0.0 <= miss_score <= 1.0:
            raise ConfigError("scorer session-affinity.miss_score", f"must be in [0, 1], got {miss_score}")
        self.miss_score = miss_score
        self._homes: dict[str, int] = {}

    def home(self, session: str | None) -> int | None:
        return None if session is None else self._homes.get(session)

    def score(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[float]:
        home = self.home(cycle.request.session_id)
        miss = self.miss_score
        if home is not None:
            scores = [1.0 if view.index == home else miss for view in views]
            if 1.0 in scores:
                return scores
        return [1.0 if miss > 0.0 else 0.0] * len(views)

    def on_routed(self, cycle: Cycle, view: InstanceView) -> None:
        session = cycle.request.session_id
        if session is not None:
            self._homes[session] = view.index


class KvFitsFilter:
    """Keeps instances whose free KV tokens hold the request's prompt plus predicted output."""

    def filter(self, cycle: Cycle, views: Sequence[InstanceView]) -> list[int]:
        request = cycle.request
        need = request.prompt_tokens + max(request.predicted_output_tokens, 1.0)
        kept = [i for i, view in enumerate(views) if view.num_free_kv_blocks * view.spec.block_size >= need]
        return keep_or_all(kept, len(views))


@dataclass(frozen=True, slots=True)
class LeastLoadedParams:
    tie_break: str = setting("none", "equal loads: none, or tokens (ordered by outstanding tokens)")

    def __post_init__(self) -> None:
        if self.tie_break not in TIE_BREAKS:
            raise ConfigError("scorer least-loaded.tie_break", f"expected one of {TIE_BREAKS}, got {self.tie_break!r}")


@dataclass(frozen=True, slots=True)
class SessionAffinityParams:
    miss_score: float = setting(0.0, "score of instances that are not the session's home")


@SCORERS.register("least-tokens", params=NoParams)
def build_least_tokens(params: NoParams, context: PolicyContext) -> LeastTokensScorer:
    return LeastTokensScorer()


@SCORERS.register("least-loaded", params=LeastLoadedParams)
def build_least_loaded(params: LeastLoadedParams, context: PolicyContext) -> LeastLoadedScorer:
    return LeastLoadedScorer(params.tie_break)


@SCORERS.register("session-affinity", params=SessionAffinityParams)
def build_session_affinity(params: SessionAffinityParams, context: PolicyContext) -> SessionAffinityScorer:
    return SessionAffinityScorer(params.miss_score)


@FILTERS.register("kv-fits", params=NoParams)
def build_kv_fits(params: NoParams, context: PolicyContext) -> KvFitsFilter:
    return KvFitsFilter()
