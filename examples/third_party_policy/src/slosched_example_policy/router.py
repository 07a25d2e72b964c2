"""Router ``my-router``: the instance with the least queued work, counted in tokens.

Work of an instance = prompt tokens waiting for prefill + ``decode_weight`` x predicted decode tokens still
to generate there (both are belief the runtime exposes on ``InstanceView``; never the true output length).
Ties go to the lowest index, so runs stay deterministic. Parameter: ``decode_weight`` (float >= 0, default
1.0; a decode token costs less than a prefill token on most GPUs only when batches are large, so the
default weighs them alike).

Importing this module registers the router: slosched imports it through the ``slosched.policies`` entry
point declared in this package's pyproject.toml.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.core.views import InstanceView
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.registry import PolicyContext, setting

NAME = "my-router"


class LeastQueuedTokensRouter:
    """A ``Router``: reads the instance views only, keeps no state, so one object serves a whole run."""

    def __init__(self, decode_weight: float) -> None:
        self.decode_weight = decode_weight

    def work(self, instance: InstanceView) -> float:
        return instance.waiting_prefill_tokens + self.decode_weight * instance.outstanding_decode_tokens

    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        works = [self.work(instance) for instance in instances]
        return works.index(min(works))  # first minimum: the lowest index wins ties


@dataclass(frozen=True, slots=True)
class MyRouterParams:
    """The parameters, declared: the registry checks names and types against them, ``slosched policies``
    lists them with their defaults and docs; range checks are the class's own."""

    decode_weight: float = setting(1.0, "weight of a predicted decode token against a prompt token (>= 0)")

    def __post_init__(self) -> None:
        if self.decode_weight < 0:
            raise ConfigError(f"{NAME}.decode_weight", f"expected a number >= 0, got {self.decode_weight!r}")


@ROUTERS.register("my-router", params=MyRouterParams)
def build(params: MyRouterParams, context: PolicyContext) -> LeastQueuedTokensRouter:
    return LeastQueuedTokensRouter(params.decode_weight)
