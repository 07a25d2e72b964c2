"""Config reload on SIGHUP: a new backend list, keys and tenants, without dropping accepted work.

``reload_gateway`` reads the file again; an invalid file, or one that changes a field only a restart can
apply (``RESTART_ONLY``), is logged and ignored: the old config keeps serving. A valid one replaces
``gateway.config`` and the identities at once (routes read them per request) and, when the backend list
changed, the dispatcher's backends (``Dispatcher.replace_backends`` -> ``rebuild_backends``).

Backend swap invariant: a backend whose entry is unchanged keeps its objects (client pool, health, queue
and in-flight window); a removed or changed one is *retired*: it takes no new call but stays at the tail of
the dispatcher's lists until its queue is empty, so calls queued at or running on it finish there (their
``Attempt`` and queue keep consistent indexes), then ``drain_retired`` drops it and closes its client. The
router and job policy are rebuilt over the new instance list (their learned state starts afresh).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slosched.core.errors import ConfigError
from slosched.gateway.backends.backend import Backend
from slosched.gateway.dispatch.queues import InstanceQueue
from slosched.gateway.ops.config import GatewayConfig, load_config
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.cluster.base import CompletionObserver
from slosched.policies.registry import PolicyContext

if TYPE_CHECKING:
    from slosched.gateway.dispatch.dispatcher import Dispatcher
    from slosched.gateway.http.app import Gateway

log = logging.getLogger("slosched.serve")

# Fields a running gateway cannot change: the socket, the policy objects' construction, the store.
RESTART_ONLY = ("host", "port", "policies", "alpha_tuning", "server", "job_store", "replica")
DRAIN_POLL_S = 0.2
# A backend's place in the dispatcher's lists; a None queue is made when the layout is installed.
Slot = tuple[Backend, "InstanceQueue | None", LinearStepPredictor]


class RetiredBackend(Backend):
    """A removed or changed backend while its calls drain: never routed, never probed or scraped. Calls in
    flight hold the original ``Backend`` (its client pool), which ``close`` closes once drained."""

    def __init__(self, original: Backend) -> None:  # no super().__init__: it would open a second pool
        self.original: Backend = original.original if isinstance(original, RetiredBackend) else original
        self.index = original.index
        self.config = original.config
        self.name = original.name
        self.url = original.url
        self.healthy = False
        self.down_since_s = original.down_since_s
        self.last_error = "draining after a config reload"
        self.metrics = original.metrics
        self.engine_state_max_age_s = original.engine_state_max_age_s
        self.pool = original.pool
        self.outlier = original.outlier  # read by /metrics, /health and /status while it drains

    def routable(self) -> bool:
        return False

    async def check_health(self) -> bool:
        return False

    async def scrape(self, now_s: float) -> bool:
        return False

    async def close(self) -> None:
        await self.original.close()


def is_idle(queue: InstanceQueue) -> bool:
    return not queue.waiting and queue.num_running == 0


def rebuild_backends(dispatcher: Dispatcher, config: GatewayConfig) -> list[RetiredBackend]:
    """Lay out ``config.backends`` (reusing unchanged ones) then the retired ones still busy; rebuild the
    policies over the result. Returns the retired backends dropped now (idle): the caller closes them."""
    current = {
        backend.name: (backend, queue, predictor)
        for backend, queue, predictor in zip(dispatcher.backends, dispatcher.queues, dispatcher.predictors, strict=True)
        if not isinstance(backend, RetiredBackend)
    }
    retired = [
        (backend, queue, predictor)
        for backend, queue, predictor in zip(dispatcher.backends, dispatcher.queues, dispatcher.predictors, strict=True)
        if isinstance(backend, RetiredBackend)
    ]
    fresh: list[Slot] = []
    for backend_config in config.backends:
        kept = current.pop(backend_config.name, None)
        if kept is not None and kept[0].config == backend_config:
            fresh.append(kept)
        else:
            fresh.append((Backend(len(fresh), backend_config, config), None, LinearStepPredictor(refit_every=256)))
    # Changed or removed: retire (a changed backend's new entry above is a new object with a new pool).
    retired += [(RetiredBackend(backend), queue, predictor) for backend, queue, predictor in current.values()]
    dropped = [backend for backend, queue, _ in retired if is_idle(queue) and isinstance(backend, RetiredBackend)]
    layout: list[Slot] = list(fresh)
    layout += [(backend, queue, predictor) for backend, queue, predictor in retired if not is_idle(queue)]
    _install(dispatcher, config, layout)
    return [backend for backend in dropped if isinstance(backend, RetiredBackend)]


def _install(dispatcher: Dispatcher, config: GatewayConfig, layout: list[Slot]) -> None:
    """Renumber, rebuild the policies over the layout's instances, and make new queues where needed."""
    for index, (backend, queue, _) in enumerate(layout):
        backend.index = index
        if isinstance(backend, RetiredBackend):
            backend.original.index = index  # calls in flight hold the original
        if queue is not None:
            queue.index = index
    old = dispatcher.context
    predictors = [predictor for _, _, predictor in layout]
    context = PolicyContext(
        instances=tuple(backend.config.spec() for backend, _, _ in layout),
        rng=old.rng,
        output_predictor=old.output_predictor,
        extras={**old.extras, "step_predictors": predictors},
    )
    built = config.policies.spec().build(context)
    queues: list[InstanceQueue] = []
    for index, (backend, queue, predictor) in enumerate(layout):
        if queue is None:
            engine = built.new_engine()
            spec = context.instances[index]
            queue = InstanceQueue(index, spec, engine, predictor, dispatcher.clock, backend.config.max_queue,
                                  min_wake_s=config.tick_s)  # fmt: skip
        queues.append(queue)
    # One synchronous block: no await between these, so no request sees a half-swapped dispatcher.
    dispatcher.router, dispatcher.job_policy = built.cluster_layer()
    observer: Any = dispatcher.router if isinstance(dispatcher.router, CompletionObserver) else None
    dispatcher._observer = observer
    dispatcher.context = context
    dispatcher.predictors = predictors
    dispatcher.backends = [backend for backend, _, _ in layout]
    dispatcher.queues = queues
    dispatcher.config = config
    tuner = dispatcher.alpha_tuner
    if tuner is not None:  # keep tuning (and the alpha reached) on the rebuilt router
        router: Any = dispatcher.router
        router.alpha = tuner.router.alpha
        tuner.router = router


async def drain_retired(dispatcher: Dispatcher) -> None:
    """Drop retired backends as their queues empty; returns when none is left."""
    while any(isinstance(backend, RetiredBackend) for backend in dispatcher.backends):
        if any(
            isinstance(backend, RetiredBackend) and is_idle(queue)
            for backend, queue in zip(dispatcher.backends, dispatcher.queues, strict=True)
        ):
            await dispatcher.replace_backends(dispatcher.config)
        await asyncio.sleep(DRAIN_POLL_S)


def restart_only_changes(old: GatewayConfig, new: GatewayConfig) -> list[str]:
    return [name for name in RESTART_ONLY if getattr(old, name, None) != getattr(new, name, None)]


def apply_identity(gateway: Gateway, config: GatewayConfig) -> None:
    """Keys and tenants: whatever the gateway resolves callers with is rebuilt from ``config``."""
    gateway.config = config
    hot: Any = gateway.app.hot
    hot.config = config
    with contextlib.suppress(ImportError):
        from slosched.gateway.ops import identity

        builder = getattr(getattr(identity, "Identities", None), "from_config", None)
        if builder is not None:
            gateway_any: Any = gateway
            gateway_any.identities = builder(config)


class Reloader:
    """Reloads one gateway's config file on demand (SIGHUP), one reload at a time, and drains what a reload
    retired in the background."""

    def __init__(self, gateway: Gateway, path: Path) -> None:
        self.gateway = gateway
        self.path = path
        self._lock = asyncio.Lock()
        self._drain: asyncio.Task[None] | None = None

    async def reload(self) -> bool:
        """Apply the file to the running gateway; False (logged, nothing changed) when it is invalid."""
        async with self._lock:
            applied = await reload_gateway(self.gateway, self.path)
        dispatcher = self.gateway.dispatcher
        draining = any(isinstance(backend, RetiredBackend) for backend in dispatcher.backends)
        if draining and (self._drain is None or self._drain.done()):
            self._drain = asyncio.create_task(drain_retired(dispatcher))
        return applied

    async def close(self) -> None:
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._drain


async def reload_gateway(gateway: Gateway, path: Path) -> bool:
    """Apply the config at ``path`` to a running gateway; False (logged, nothing changed) when invalid."""
    try:
        new = load_config(path)
    except ConfigError as error:
        log.error("config reload ignored, %s is invalid: %s", path, error)
        return False
    old = gateway.config
    changed = restart_only_changes(old, new)
    if changed:
        log.error("config reload ignored: %s change only with a restart; the old config keeps serving", changed)
        return False
    try:
        apply_identity(gateway, new)
    except (ConfigError, ValueError) as error:
        log.error("config reload ignored, keys or tenants invalid: %s", error)
        apply_identity(gateway, old)
        return False
    if [b.model_dump() for b in old.backends] != [b.model_dump() for b in new.backends]:
        await gateway.dispatcher.replace_backends(new)
    else:
        gateway.dispatcher.config = new
    log.warning("config reloaded from %s: %d backends", path, len(new.backends))
    return True
