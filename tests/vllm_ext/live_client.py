"""A small client for the live plugin tests and the engine-live bench: completions with ``vllm_xargs``,
control-file switches that wait until the engine applied them, and the step log."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from slosched.contract import HEADER_REQUEST_ID, sign_xargs, xargs_key
from slosched.fidelity.step_log import read_lines
from slosched.vllm_ext.control import write_control
from slosched.vllm_ext.state_export import read_state

_versions = itertools.count(int(time.time()))
_request_ids = itertools.count()


async def complete(
    client: httpx.AsyncClient, url: str, prompt: str, max_tokens: int, xargs: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "tiny", "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True}
    headers: dict[str, str] = {}
    key = xargs_key()
    if xargs:
        # Signed as the gateway signs what it forwards: vLLM's request id embeds the X-Request-Id header.
        request_id = f"live-{next(_request_ids)}"
        headers[HEADER_REQUEST_ID] = request_id
        body["vllm_xargs"] = xargs if key is None else sign_xargs(dict(xargs), request_id, key)
    response = await client.post(f"{url}/v1/completions", json=body, headers=headers, timeout=300)
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    data["done_s"] = time.monotonic()
    return data


def _nudge(url: str) -> None:
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(f"{url}/v1/completions", json={"model": "tiny", "prompt": "x", "max_tokens": 1}, timeout=120)


def set_control(url: str, control: Path, state: Path, document: dict[str, Any], timeout_s: float = 30) -> int:
    """Write the control file and nudge the engine (a one-token request in the background, so an idle
    engine runs a step) until its state export shows the new version."""
    version = next(_versions)
    write_control(control, {**document, "version": version})
    deadline = time.monotonic() + timeout_s
    next_nudge = 0.0
    while time.monotonic() < deadline:
        if time.monotonic() >= next_nudge:  # the engine polls the file from its loop: keep it stepping
            threading.Thread(target=_nudge, args=(url,), daemon=True).start()
            next_nudge = time.monotonic() + 0.3
        data = read_state(state)
        if data and data["plugin"]["control_version"] == version:
            assert not data["plugin"]["control_error"], data["plugin"]["control_error"]
            return version
        time.sleep(0.05)
    raise TimeoutError(f"engine did not apply control version {version}")


def steps_since(log: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """Step-log records written after byte ``offset``, and the new offset."""
    return read_lines(log, offset)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


_pool = ThreadPoolExecutor(max_workers=64)


def submit(url: str, prompt: str, max_tokens: int, xargs: dict[str, Any] | None = None) -> Future[dict[str, Any]]:
    """A completion in a background thread (tests poll the step log while it runs)."""

    async def one() -> dict[str, Any]:
        async with httpx.AsyncClient() as client:
            return await complete(client, url, prompt, max_tokens, xargs)

    return _pool.submit(asyncio.run, one())


_WORDS = (
    "alpha",
    "brown",
    "quick",
    "lazy",
    "model",
    "token",
    "batch",
    "queue",
    "deadline",
    "engine",
    "cache",
    "prefix",
)
_nonce = itertools.count()


def unique_prompt(words: int) -> str:
    """A prompt no earlier request shares (no prefix-cache hits), about ``words`` tokens or more."""
    seed = next(_nonce)
    body = " ".join(f"{_WORDS[(seed + 7 * i) % len(_WORDS)]}{(seed * 31 + i) % 97}" for i in range(words))
    return f"{time.time_ns()} {body}"
