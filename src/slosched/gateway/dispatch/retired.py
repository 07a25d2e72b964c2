"""A backend a config reload removed or changed, while the calls it holds drain (``slots.py``)."""

from __future__ import annotations

from slosched.gateway.backends.backend import Backend


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
