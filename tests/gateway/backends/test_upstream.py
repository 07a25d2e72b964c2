"""The gateway's backend HTTP client (``gateway.backends.upstream``) against raw asyncio servers, on the default loop
and on uvloop (what ``slosched serve`` runs on): framing, keep-alive reuse, timeouts, error mapping."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

import pytest
import uvloop

from slosched.devtools.stub import free_port
from slosched.gateway.backends.forwarding import is_broken
from slosched.gateway.backends.upstream import (
    UpstreamConnectError,
    UpstreamDisconnectedError,
    UpstreamPool,
    UpstreamProtocolError,
    UpstreamTimeoutError,
)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}"


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Callable[[Coroutine[Any, Any, None]], None]:
    def runner(coroutine: Coroutine[Any, Any, None]) -> None:
        if request.param == "uvloop":
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as loop_runner:
                loop_runner.run(coroutine)
        else:
            asyncio.run(coroutine)

    return runner


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head + await reader.readexactly(length)


@contextlib.asynccontextmanager
async def server(handler: Handler) -> AsyncIterator[tuple[UpstreamPool, list[int]]]:
    """A server running ``handler`` per connection; yields a pool to it and the list of connection ids."""
    connections: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections))
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    pool = UpstreamPool(f"http://127.0.0.1:{port}", connect_s=1.0, total_s=5.0)
    try:
        yield pool, connections
    finally:
        await pool.aclose()
        srv.close()


async def keep_alive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        request = await _read_request(reader)
        assert b"x-request-id: r1" in request and request.endswith(b'{"a":1}')
        writer.write(OK)
        await writer.drain()


def test_keep_alive_connection_is_reused(run: Callable[[Coroutine[Any, Any, None]], None]) -> None:
    async def scenario() -> None:
        async with server(keep_alive) as (pool, connections):
            for _ in range(5):
                response = await pool.request("POST", "/v1/x", b'{"a":1}', {"x-request-id": "r1"}, 1.0)
                assert response.status == 200 and response.header(b"content-type") == "application/json"
                assert await response.read(1.0) == b"{}"
                response.release()
            assert len(connections) == 1

    run(scenario())


def test_chunked_stream_arrives_in_pieces_and_ends(run: Callable[[Coroutine[Any, Any, None]], None]) -> None:
    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b"data: 1\n\n", b"data: 2\n\n"):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await _read_request(reader)  # the connection stays open for the next request

    async def scenario() -> None:
        async with server(chunked) as (pool, _):
            response = await pool.request("POST", "/s", b"{}", None, 1.0)
            pieces = []
            while piece := await response.next_chunk(1.0):
                pieces.append(piece)
            assert pieces == [b"data: 1\n\n", b"data: 2\n\n"] and response.complete
            response.release()

    run(scenario())


def test_body_until_close_and_server_closing_idle_connections(run: Callable[[Coroutine[Any, Any, None]], None]) -> None:
    async def http10(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.0 200 OK\r\n\r\nwhole body")  # no length: the body ends at close

    async def scenario() -> None:
        async with server(http10) as (pool, connections):
            for _ in range(3):  # each connection is closed by the server: the next request opens another
                response = await pool.request("GET", "/h", first_byte_s=1.0)
                assert await response.read(1.0) == b"whole body"
                response.release()
            assert len(connections) == 3

    run(scenario())


def test_errors_map_to_broken_or_slow(run: Callable[[Coroutine[Any, Any, None]], None]) -> None:
    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        await asyncio.sleep(1.0)

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        await writer.drain()

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.5)

    async def scenario() -> None:
        refused = UpstreamPool(f"http://127.0.0.1:{free_port()}", connect_s=1.0, total_s=5.0)
        with pytest.raises(UpstreamConnectError) as connect_error:
            await refused.request("GET", "/", first_byte_s=1.0)
        assert is_broken(connect_error.value)
        async with server(slow) as (pool, _):
            with pytest.raises(UpstreamTimeoutError) as timeout_error:
                await pool.request("POST", "/", b"{}", None, 0.1)
            assert not is_broken(timeout_error.value)
        async with server(cut) as (pool, _):
            response = await pool.request("POST", "/", b"{}", None, 1.0)
            with pytest.raises(UpstreamDisconnectedError) as cut_error:
                await response.read(1.0)
            response.close()
            assert is_broken(cut_error.value)
        async with server(garbage) as (pool, _):
            with pytest.raises(UpstreamProtocolError):
                await pool.request("POST", "/", b"{}", None, 1.0)

    run(scenario())


def test_read_timeout_mid_body_and_total_deadline(run: Callable[[Coroutine[Any, Any, None]], None]) -> None:
    async def stalls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nstart")
        await writer.drain()
        await asyncio.sleep(2.0)

    async def scenario() -> None:
        async with server(stalls) as (pool, _):
            response = await pool.request("POST", "/", b"{}", None, 1.0)
            assert await response.next_chunk(1.0) == b"start"
            with pytest.raises(UpstreamTimeoutError):
                await response.next_chunk(0.1)
            response.close()
            response = await pool.request("POST", "/", b"{}", None, 1.0, total_s=0.2)
            with pytest.raises(UpstreamTimeoutError):
                await response.read(5.0)  # the exchange's total deadline comes first
            response.close()

    run(scenario())


def test_reused_connection_closed_before_any_response_is_retried_once(
    run: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    async def closes_second(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(OK)
        await writer.drain()
        await _read_request(reader)  # the keep-alive race: the server drops the connection it had kept

    async def scenario() -> None:
        async with server(closes_second) as (pool, connections):
            for _ in range(2):
                response = await pool.request("POST", "/", b"{}", None, 1.0)
                assert await response.read(1.0) == b"{}"
                response.release()
            assert len(connections) == 2

    run(scenario())
