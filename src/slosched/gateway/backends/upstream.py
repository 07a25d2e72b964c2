"""A small keep-alive HTTP/1.1 client for the gateway's backend leg (asyncio protocol + httptools parser).

Why not aiohttp or httpx: on the gateway's hot path their per-request machinery (request/response objects,
tracing hooks, cookie jars, per-request timer tasks) cost several hundred microseconds of CPU, more than
everything else the gateway does per call. This client writes one pre-encoded request and lets the C
parser (httptools, already uvicorn's) call back into a protocol object; waiting costs one future and one
timer handle per wake-up. Measured (issue 7, commit ee6f50f, ``slosched bench gateway``, router CPU per
proxied request on the stub backend; docs/results/gateway.md): 0.445 ms with aiohttp -> 0.146 ms, ~3x,
with this client together with that commit's plain-ASGI routes and orjson (the client's share was not
timed alone); aiohttp itself had replaced httpx, ~7x more CPU per request than aiohttp then.

Scope: what vLLM's OpenAI server (uvicorn) speaks — responses framed by ``Content-Length`` or chunked
encoding, or a body that ends at connection close; ``http``/``https`` URLs; no redirects, proxies or
cookies. Invariants: a connection serves one request at a time; only a connection whose response was read
to the end and that the server keeps alive goes back to the idle pool; every wait has a timeout.

Errors are ``UpstreamError`` subclasses; ``UpstreamTimeoutError`` (also a ``TimeoutError``) means slow,
every other one means the server is gone or broken (connect refused, closed mid-response, bad framing).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import cast
from urllib.parse import urlsplit

import httptools

_PAUSE_BYTES = 1 << 20  # stop reading from a backend that is this far ahead of the client
_MAX_IDLE = 256  # idle keep-alive connections kept per backend (more are closed on release)


class UpstreamError(Exception):
    """The backend leg failed."""


class UpstreamConnectError(UpstreamError):
    """No connection: refused, unreachable, or the pool is closed."""


class UpstreamDisconnectedError(UpstreamError):
    """The server closed the connection before the response ended."""


class UpstreamProtocolError(UpstreamError):
    """The server's bytes are not a valid HTTP/1.1 response."""


class UpstreamTimeoutError(UpstreamError, TimeoutError):
    """A connect, first-byte, read or total timeout expired."""


def _expire(waiter: asyncio.Future[None], what: str) -> None:
    if not waiter.done():
        waiter.set_exception(UpstreamTimeoutError(f"{what} timed out"))


class _Connection(asyncio.Protocol):
    """One TCP connection; per-response state is reset by ``start``. Parser callbacks fill the buffers
    and wake the single waiter (the task reading the response)."""

    __slots__ = (
        "_parser",
        "_pool",
        "active",
        "buffered",
        "chunks",
        "closed",
        "complete",
        "error",
        "framed",
        "got_bytes",
        "headers",
        "headers_done",
        "keep_alive",
        "paused",
        "status",
        "transport",
        "waiter",
    )

    def __init__(self, pool: UpstreamPool) -> None:
        self._pool = pool
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.active = False  # a request is in flight or its response is being read
        self.waiter: asyncio.Future[None] | None = None
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_done = self.complete = self.got_bytes = self.framed = self.paused = False
        self.keep_alive = False
        self.chunks: list[bytes] = []
        self.buffered = 0
        self.error: UpstreamError | None = None

    def start(self) -> None:
        self.active = True
        self.status = 0
        self.headers = []
        self.headers_done = self.complete = self.got_bytes = self.framed = self.keep_alive = False
        self.chunks = []
        self.buffered = 0
        self.error = None

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def fail(self, error: UpstreamError) -> None:
        if self.error is None:
            self.error = error
        self.close()
        self._wake()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def take(self) -> bytes:
        """Everything buffered so far (resumes reading if it was paused)."""
        chunks = self.chunks
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self.chunks = []
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data

    # --- asyncio.Protocol --------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        if not self.active:
            self.fail(UpstreamProtocolError("bytes on an idle connection"))
            return
        self.got_bytes = True
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as error:
            self.fail(UpstreamProtocolError(f"invalid HTTP response: {error}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pool.forget(self)
        if self.active and not self.complete:
            if self.headers_done and not self.framed:
                self.complete = True  # a body delimited by connection close (HTTP/1.0 style)
            else:
                detail = f": {type(exc).__name__}" if exc is not None else ""
                self.fail(UpstreamDisconnectedError(f"connection closed before the response ended{detail}"))
        self._wake()

    # --- httptools callbacks -----------------------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length" or name == b"transfer-encoding":
            self.framed = True
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self.keep_alive = self._parser.should_keep_alive()  # read here: the parser resets after the message
        self.headers_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > _PAUSE_BYTES and not self.paused and self.transport is not None:
            self.paused = True  # backpressure: the reader resumes it in ``take``
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self.complete = True
        self._wake()

    def reusable(self) -> bool:
        return self.complete and self.keep_alive and not self.closed and self.error is None


class UpstreamResponse:
    """A response whose status line and headers arrived. Read it with ``read`` (whole body) or
    ``next_chunk`` (streaming), then ``release`` (read to the end) or ``close`` (cut short)."""

    __slots__ = ("_conn", "_deadline", "_done", "_loop", "_pool", "headers", "status")

    def __init__(self, pool: UpstreamPool, conn: _Connection, deadline: float) -> None:
        self._pool = pool
        self._conn = conn
        self._loop = pool.loop()
        self._deadline = deadline
        self._done = False
        self.status = conn.status
        self.headers = conn.headers

    def header(self, name: bytes) -> str | None:
        """First value of header ``name`` (lowercase bytes), decoded as latin-1."""
        for key, value in self.headers:
            if key == name:
                return value.decode("latin-1")
        return None

    @property
    def complete(self) -> bool:
        return self._conn.complete and not self._conn.chunks

    async def next_chunk(self, timeout_s: float) -> bytes:
        """The body bytes that arrived since the last call (waiting up to ``timeout_s`` for some); b"" at
        the end of the body."""
        conn = self._conn
        while not conn.chunks:
            if conn.error is not None:
                raise conn.error
            if conn.complete:
                return b""
            await _wait(conn, self._loop, min(timeout_s, self._deadline - self._loop.time()), "read")
        return conn.take()

    async def read(self, timeout_s: float) -> bytes:
        """The whole body, which must end within ``timeout_s``."""
        conn = self._conn
        until = min(self._loop.time() + timeout_s, self._deadline)
        parts: list[bytes] = []
        while True:
            if conn.chunks:
                parts.append(conn.take())
            if conn.error is not None:
                raise conn.error
            if conn.complete:
                return parts[0] if len(parts) == 1 else b"".join(parts)
            await _wait(conn, self._loop, until - self._loop.time(), "read")

    def release(self) -> None:
        """Done with the response: a fully read keep-alive connection goes back to the pool."""
        if self._done:
            return
        self._done = True
        conn = self._conn
        conn.active = False
        if conn.reusable() and not conn.chunks:
            self._pool.put(conn)
        else:
            conn.close()

    def close(self) -> None:
        """Done with the response, perhaps before its end: drop the connection (its state is unknown)."""
        if self._done:
            return
        self._done = True
        self._conn.active = False
        self._conn.close()


async def _wait(conn: _Connection, loop: asyncio.AbstractEventLoop, timeout_s: float, what: str) -> None:
    """Wait for the connection's next event, at most ``timeout_s``."""
    if timeout_s <= 0:
        raise UpstreamTimeoutError(f"{what} timed out")
    waiter = loop.create_future()
    conn.waiter = waiter
    timer = loop.call_later(timeout_s, _expire, waiter, what)
    try:
        await waiter
    finally:
        timer.cancel()
        conn.waiter = None


class UpstreamPool:
    """Keep-alive connections to one server (``url`` = scheme://host:port). Not thread-safe: use it from
    one event loop at a time."""

    def __init__(self, url: str, connect_s: float, total_s: float) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl: ssl.SSLContext | None = ssl.create_default_context() if parts.scheme == "https" else None
        self._host_header = f"Host: {parts.netloc}\r\n".encode("latin-1")
        self.connect_s = connect_s
        self.total_s = total_s
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()

    @staticmethod
    def loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    async def request(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        first_byte_s: float = 60.0,
        total_s: float | None = None,
    ) -> UpstreamResponse:
        """Send one request and wait (at most ``first_byte_s``) for the response's status and headers.
        A reused connection the server had already closed is retried once on a fresh one."""
        lines = [f"{method} {path} HTTP/1.1\r\n".encode("latin-1"), self._host_header]
        if body or method == "POST":
            lines.append(b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body))
        for name, value in (headers or {}).items():
            lines.append(f"{name}: {value}\r\n".encode("latin-1"))
        lines.append(b"\r\n")
        lines.append(body)
        payload = b"".join(lines)
        deadline = self.loop().time() + (total_s if total_s is not None else self.total_s)
        conn = self._take_idle()
        if conn is not None:
            try:
                return await self._exchange(conn, payload, first_byte_s, deadline)
            except UpstreamDisconnectedError:
                if conn.got_bytes:
                    raise
                # The server closed this idle connection as we reused it: it never saw the request.
        return await self._exchange(await self._connect(), payload, first_byte_s, deadline)

    async def _exchange(
        self, conn: _Connection, payload: bytes, first_byte_s: float, deadline: float
    ) -> UpstreamResponse:
        conn.start()
        assert conn.transport is not None
        conn.transport.write(payload)
        loop = self.loop()
        until = min(loop.time() + first_byte_s, deadline)
        try:
            while not conn.headers_done:
                if conn.error is not None:
                    raise conn.error
                await _wait(conn, loop, until - loop.time(), "first byte")
        except BaseException:
            conn.active = False
            conn.close()
            raise
        return UpstreamResponse(self, conn, deadline)

    def _take_idle(self) -> _Connection | None:
        idle = self._idle
        while idle:
            conn = idle.pop()
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn
        return None

    async def _connect(self) -> _Connection:
        loop = self.loop()
        try:
            async with asyncio.timeout(self.connect_s):
                _, conn = await loop.create_connection(lambda: _Connection(self), self.host, self.port, ssl=self._ssl)
        except TimeoutError as error:
            raise UpstreamTimeoutError(f"connect to {self.host}:{self.port} timed out") from error
        except OSError as error:
            raise UpstreamConnectError(f"connect to {self.host}:{self.port}: {type(error).__name__}") from error
        self._all.add(conn)
        return conn

    def put(self, conn: _Connection) -> None:
        if len(self._idle) >= _MAX_IDLE:
            conn.close()
        else:
            self._idle.append(conn)

    def forget(self, conn: _Connection) -> None:
        self._all.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)

    async def aclose(self) -> None:
        """Close every connection, idle or busy (a later request opens new ones)."""
        for conn in list(self._all):
            conn.close()
        self._idle.clear()
