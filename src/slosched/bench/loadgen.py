"""A small HTTP/1.1 load generator on raw asyncio streams (keep-alive connections, open or closed loop).

httpx costs ~1 ms of client CPU per request, which on a 2-core machine would swamp the gateway overhead
being measured; pre-encoded requests on raw sockets cost a few tens of microseconds. Handles responses
with ``Content-Length`` or chunked transfer encoding; anything else is an error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

import numpy as np

T = TypeVar("T")


def run_load(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a load coroutine on uvloop when installed: the generator shares the machine's cores with the
    servers it measures, so its own CPU per request perturbs every target's figures."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
        return asyncio.run(coroutine)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


@dataclass(slots=True)
class LoadResult:
    """Latencies (seconds) of successful requests, error count, wall time of the run."""

    latencies_s: list[float] = field(default_factory=list)
    errors: int = 0
    wall_s: float = 0.0

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_s, q) * 1000.0) if self.latencies_s else float("nan")

    @property
    def throughput(self) -> float:
        return len(self.latencies_s) / self.wall_s if self.wall_s > 0 else 0.0


def encode_post(url: str, path: str, body: bytes) -> tuple[str, int, bytes]:
    parts = urlsplit(url)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return parts.hostname or "127.0.0.1", int(parts.port or 80), head.encode() + body


async def _read_response(reader: asyncio.StreamReader) -> int:
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("closed")
    status = int(status_line.split()[1])
    length: int | None = None
    chunked = False
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.lower() == "content-length":
            length = int(value.strip())
        elif name.lower() == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    if chunked:
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length is not None:
        await reader.readexactly(length)
    else:
        raise ConnectionError("response without length")
    return status


class _Pool:
    """Keep-alive connections to one host; a connection is used by one request at a time."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def request(self, payload: bytes) -> int:
        if self.idle:
            try:
                return await self._send(self.idle.pop(), payload)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass  # the server closed this idle keep-alive connection (its timeout): retry on a fresh one
        return await self._send(await asyncio.open_connection(self.host, self.port), payload)

    async def _send(self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], payload: bytes) -> int:
        reader, writer = conn
        try:
            writer.write(payload)
            status = await _read_response(reader)
        except BaseException:
            writer.close()
            raise
        self.idle.append(conn)
        return status

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()
        self.idle.clear()


async def _timed(pool: _Pool, payload: bytes, result: LoadResult, timeout_s: float) -> None:
    start = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):  # no extra task per request, unlike wait_for on 3.11
            status = await pool.request(payload)
    except (OSError, ConnectionError, TimeoutError, ValueError, IndexError, asyncio.IncompleteReadError):
        result.errors += 1
        return
    if status == 200:
        result.latencies_s.append(time.perf_counter() - start)
    else:
        result.errors += 1


async def open_loop(
    url: str, path: str, body: bytes, rate: float, duration_s: float, timeout_s: float = 10.0
) -> LoadResult:
    """Requests at a fixed rate (evenly spaced), regardless of completions; latencies include queueing."""
    host, port, payload = encode_post(url, path, body)
    pool, result, tasks = _Pool(host, port), LoadResult(), []
    start = time.perf_counter()
    total = int(rate * duration_s)
    for index in range(total):
        delay = start + index / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_timed(pool, payload, result, timeout_s)))
    await asyncio.gather(*tasks)
    result.wall_s = time.perf_counter() - start
    pool.close()
    return result


async def closed_loop(url: str, path: str, body: bytes, concurrency: int, duration_s: float) -> LoadResult:
    """``concurrency`` workers each sending back to back for ``duration_s``: the sustainable request rate."""
    host, port, payload = encode_post(url, path, body)
    pool, result = _Pool(host, port), LoadResult()
    stop_at = time.perf_counter() + duration_s

    async def worker() -> None:
        while time.perf_counter() < stop_at:
            await _timed(pool, payload, result, 10.0)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.wall_s = time.perf_counter() - start
    pool.close()
    return result
