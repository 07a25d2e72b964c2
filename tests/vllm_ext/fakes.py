"""Duck-typed stand-ins for vLLM's Request and Scheduler (the attributes the plugin reads)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

from slosched.contract import sign_xargs, xargs_key


class FakeRequest:
    def __init__(self, request_id: str, prompt: int = 100, computed: int = 0, output: int = 0, **extra: Any):
        self.request_id = request_id
        self.num_prompt_tokens = prompt
        self.num_computed_tokens = computed
        self.num_output_tokens = output
        self.max_tokens = extra.pop("max_tokens", 64)
        self.arrival_time = extra.pop("arrival", 1000.0)
        self.priority = extra.pop("priority", 0)
        self.num_preemptions = 0
        xargs = extra.pop("xargs", None)
        key = xargs_key()
        if xargs and key is not None and extra.pop("sign", True):  # as the gateway sends them
            xargs = sign_xargs(dict(xargs), request_id, key)
        extra.pop("sign", None)
        self.sampling_params = SimpleNamespace(extra_args=xargs)
        self.is_prefill_chunk = extra.pop("chunk", False)
        assert not extra, extra

    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + self.num_output_tokens

    def __repr__(self) -> str:
        return self.request_id


class FakeQueue(deque[Any]):
    """vLLM's FCFSRequestQueue surface used by the plugin."""

    def remove_requests(self, requests: Iterable[Any]) -> None:
        drop = {id(r) for r in requests}
        kept = [r for r in self if id(r) not in drop]
        self.clear()
        self.extend(kept)

    def add_request(self, request: Any) -> None:
        self.append(request)


class FakeScheduler:
    def __init__(self, max_tokens: int = 256, max_active: int = 8, free_blocks: int = 100) -> None:
        self.running: list[Any] = []
        self.waiting = FakeQueue()
        self.kv_holding_waiting = FakeQueue()
        self.requests: dict[str, Any] = {}
        self.max_num_scheduled_tokens = max_tokens
        self.max_num_active_reqs = max_active
        self.max_model_len = 2048
        self.block_size = 16
        self.kv_cache_config = SimpleNamespace(num_blocks=200)
        self.cache_config = SimpleNamespace(enable_prefix_caching=True)
        pool = SimpleNamespace(get_num_free_blocks=lambda: free_blocks)
        self.kv_cache_manager = SimpleNamespace(block_pool=pool, get_computed_blocks=lambda raw: (None, 0, 0))

    def add(self, request: FakeRequest, running: bool = False) -> FakeRequest:
        self.requests[request.request_id] = request
        (self.running.append if running else self.waiting.append)(request)
        return request
