"""``bench.loadgen``: request encoding, response parsing (length, chunked, neither), the result figures,
and open/closed loops against a tiny in-process HTTP/1.1 server (keep-alive, one idle connection closed by
the server)."""

from __future__ import annotations

import asyncio
import math

import pytest

from slosched.bench.loadgen import LoadResult, _read_response, closed_loop, encode_post, open_loop, run_load


def test_encode_post() -> None:
    host, port, payload = encode_post("http://127.0.0.1:8123", "/v1/completions", b'{"a":1}')
    assert (host, port) == ("127.0.0.1", 8123)
    head, body = payload.split(b"\r\n\r\n")
    assert head.split(b"\r\n") == [
        b"POST /v1/completions HTTP/1.1",
        b"Host: 127.0.0.1:8123",
        b"Content-Type: application/json",
        b"Content-Length: 7",
    ]
    assert body == b'{"a":1}'


def _parse(data: bytes, rest: bytes = b"NEXT") -> tuple[int, bytes]:
    async def go() -> tuple[int, bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(data + rest)
        reader.feed_eof()
        status = await _read_response(reader)
        return status, await reader.read()

    return asyncio.run(go())


def test_read_response_consumes_exactly_one_response() -> None:
    assert _parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello") == (200, b"NEXT")
    chunked = b"HTTP/1.1 429 Too Many\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n"
    assert _parse(chunked) == (429, b"NEXT")
    with pytest.raises(ConnectionError, match="without length"):
        _parse(b"HTTP/1.1 200 OK\r\n\r\nhello")
    with pytest.raises(ConnectionError, match="closed"):
        _parse(b"", rest=b"")


def test_load_result_figures() -> None:
    result = LoadResult(latencies_s=[0.001, 0.002, 0.003, 0.004], errors=1, wall_s=2.0)
    assert result.percentile_ms(50) == pytest.approx(2.5)
    assert result.throughput == 2.0
    assert math.isnan(LoadResult().percentile_ms(99)) and LoadResult().throughput == 0.0


class TinyServer:
    """Answers every POST with 200 (every ``fail_every``-th with 500); closes a connection after
    ``close_after`` requests on it (a keep-alive timeout)."""

    def __init__(self, fail_every: int = 0, close_after: int = 0) -> None:
        self.fail_every, self.close_after = fail_every, close_after
        self.requests = 0
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(
                    next(line for line in head.split(b"\r\n") if line.startswith(b"Content-Length")).split(b":")[1]
                )
                await reader.readexactly(length)
                self.requests += 1
                served += 1
                failed = self.fail_every and self.requests % self.fail_every == 0
                status = b"500 Oops" if failed else b"200 OK"
                writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
                if self.close_after and served >= self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


async def _serve(server: TinyServer, load: object) -> LoadResult:
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        return await load(f"http://127.0.0.1:{port}")  # type: ignore[operator]
    finally:
        listener.close()


def test_open_loop_sends_rate_times_duration_requests() -> None:
    server = TinyServer(fail_every=4)
    result = run_load(_serve(server, lambda url: open_loop(url, "/x", b"{}", rate=40.0, duration_s=0.25)))
    assert server.requests == 10
    assert len(result.latencies_s) + result.errors == 10 and result.errors == 2
    assert result.wall_s > 0


def test_closed_loop_reuses_connections_and_retries_closed_idle_ones() -> None:
    server = TinyServer(close_after=3)
    result = run_load(_serve(server, lambda url: closed_loop(url, "/x", b"{}", concurrency=2, duration_s=0.2)))
    assert result.errors == 0 and len(result.latencies_s) == server.requests > 0
    assert server.connections < server.requests  # keep-alive: connections are reused
    if server.requests > 6:
        assert server.connections > 2  # closed idle connections were replaced
