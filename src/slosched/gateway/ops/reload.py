"""Config reload on SIGHUP: a new backend list, keys and tenants, without dropping accepted work.

``Reloader.reload`` reads the file again; an invalid file, or one that changes a field only a restart can
apply (``RESTART_ONLY``), is logged and ignored: the old config keeps serving. A valid one replaces the
gateway's config and identities at once (``ReloadTarget.apply_config``; routes read them per request), then
the dispatcher's slot set (``Dispatcher.reconfigure``: one swap of a new ``SlotSet``; backends a changed
list removed drain in the background, ``Dispatcher.drain_retired``). Tenant weights, bands and
``fair_share`` reach every queue, kept ones included, with or without a change of the backend list.

The gateway is reached through two small protocols, so this module (in ``ops``, below ``dispatch`` and
``http``) depends on neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Protocol

from slosched.core.errors import ConfigError
from slosched.gateway.ops.config import GatewayConfig, load_config

log = logging.getLogger("slosched.gateway")

# Fields a running gateway cannot change: the socket, the policy objects' construction, the store.
RESTART_ONLY = ("host", "port", "policies", "alpha_tuning", "server", "job_store", "replica")


class ReconfigurableDispatch(Protocol):
    """What a reload asks of the dispatcher (``dispatch.Dispatcher``)."""

    async def reconfigure(self, config: GatewayConfig) -> None: ...

    @property
    def draining(self) -> bool: ...

    async def drain_retired(self) -> None: ...


class ReloadTarget(Protocol):
    """What a reload asks of the gateway (``http.app.Gateway``)."""

    @property
    def config(self) -> GatewayConfig: ...

    @property
    def dispatcher(self) -> ReconfigurableDispatch: ...

    def apply_config(self, config: GatewayConfig) -> None: ...


def restart_only_changes(old: GatewayConfig, new: GatewayConfig) -> list[str]:
    return [name for name in RESTART_ONLY if getattr(old, name, None) != getattr(new, name, None)]


class Reloader:
    """Reloads one gateway's config file on demand (SIGHUP), one reload at a time, and drains what a reload
    retired in the background."""

    def __init__(self, gateway: ReloadTarget, path: Path) -> None:
        self.gateway = gateway
        self.path = path
        self._lock = asyncio.Lock()
        self._drain: asyncio.Task[None] | None = None

    async def reload(self) -> bool:
        """Apply the file to the running gateway; False (logged, nothing changed) when it is invalid."""
        async with self._lock:
            applied = await self._apply()
        dispatcher = self.gateway.dispatcher
        if dispatcher.draining and (self._drain is None or self._drain.done()):
            self._drain = asyncio.create_task(dispatcher.drain_retired())
        return applied

    async def close(self) -> None:
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._drain

    async def _apply(self) -> bool:
        path, gateway = self.path, self.gateway
        try:
            new = load_config(path)
        except ConfigError as error:
            log.error("config reload ignored, %s is invalid: %s", path, error)
            return False
        changed = restart_only_changes(gateway.config, new)
        if changed:
            log.error("config reload ignored: %s change only with a restart; the old config keeps serving", changed)
            return False
        try:
            gateway.apply_config(new)
        except (ConfigError, ValueError) as error:
            log.error("config reload ignored, keys or tenants invalid: %s", error)
            return False
        await gateway.dispatcher.reconfigure(new)
        log.warning("config reloaded from %s: %d backends", path, len(new.backends))
        return True
