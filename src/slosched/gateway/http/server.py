"""The gateway's HTTP server: uvicorn (uvloop + httptools) with the limits of the ``server:`` config.

uvicorn alone holds a connection that trickles its headers or body forever and takes headers of any size
under httptools, so ``GuardedHttpProtocol`` adds, per connection and with loop timers only (nothing on
the per-request hot path but arming and cancelling a timer):

- headers: ``header_timeout_s`` from the connection's opening (or a follow-up request's first byte) to the
  end of its headers, else 408; more than ``max_header_bytes`` or ``max_headers`` -> 431;
- body: a silence longer than ``body_chunk_timeout_s`` or a body longer than ``body_timeout_s`` -> 408 (the
  app's ``receive`` then answers ``http.disconnect``, so the request ends wherever it waits); a body the app
  has not read yet (reading paused) is not the client's stall and is not timed;
- ``max_connections`` open at once (more -> 503 and closed), ``max_requests_per_connection``.

``GatewayServer`` adds SIGHUP (reload the config file, ``gateway/ops/reload.py``) and a bounded shutdown: on
SIGTERM uvicorn stops accepting and waits for calls in flight up to ``shutdown_grace_s``, then cancels them
(each ends ``cancelled`` in the dispatcher's counts); the whole shutdown is bounded too, so a hung backend
cannot keep the process alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import resource
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from slosched.core.errors import ConfigError
from slosched.gateway.http.app import Gateway
from slosched.gateway.ops.config import GatewayConfig
from slosched.gateway.ops.reload import Reloader
from slosched.gateway.ops.server_config import ServerConfig

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - httptools ships with uvicorn[standard] on every supported platform
    HttpToolsProtocol = None  # type: ignore[assignment, misc]

log = logging.getLogger("slosched.gateway")

# Beyond the grace for calls in flight: the app's own shutdown (closing backend clients, job store).
SHUTDOWN_MARGIN_S = 5.0
_REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}
_CODES = {408: "request_timeout", 431: "headers_too_large", 503: "too_many_connections"}


def error_bytes(status: int, message: str) -> bytes:
    """A whole HTTP/1.1 response with an OpenAI-style JSON error, closing the connection."""
    body = json.dumps({"error": {"message": message, "type": _CODES[status], "code": status}}).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


class GatewayUvicornConfig(uvicorn.Config):
    """uvicorn's config plus the ``server:`` limits, which the protocol reads per connection."""

    def __init__(self, app: Any, limits: ServerConfig, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        room = fd_room()
        if room < limits.max_connections:  # 503s before accept() fails for want of a file descriptor
            log.warning("max_connections %d lowered to %d by the open-file limit", limits.max_connections, room)
            limits = limits.model_copy(update={"max_connections": room})
        self.limits = limits


FD_RESERVE = 64  # listening socket, logs, the job store, scrapes and health checks


def fd_room() -> int:
    """Client connections the open-file limit leaves room for: each may hold an upstream connection too, so
    half of what the reserve leaves. At the cap a new connection is still accepted and answered 503."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    return max((soft - FD_RESERVE) // 2, 1)


if HttpToolsProtocol is not None:

    class GuardedHttpProtocol(HttpToolsProtocol):
        """httptools' protocol with header/body timeouts, header limits and a connection cap."""

        def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
            super().__init__(config, *args, **kwargs)
            self.limits = config.limits if isinstance(config, GatewayUvicornConfig) else ServerConfig()
            self._timer: asyncio.TimerHandle | None = None
            self._awaiting_headers = True
            self._header_bytes = 0  # raw bytes of headers not complete yet (httptools buffers them)
            self._header_size = 0  # parsed URL + header names and values
            self._header_count = 0
            self._num_requests = 0
            self._body_start_s = 0.0
            self._last_chunk_s = 0.0
            self._rejected = False

        # --- timers --------------------------------------------------------------------------------------
        def _arm(self, delay_s: float, callback: Any) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self.loop.call_later(delay_s, callback)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _header_timeout(self) -> None:
            self._timer = None
            self._reject(408, f"request headers not received within {self.limits.header_timeout_s:g} s")

        def _body_tick(self) -> None:
            """Every chunk interval: 408 unless a chunk came (or the app paused reading) since the last."""
            self._timer = None
            limits = self.limits
            now = self.loop.time()
            elapsed = now - self._body_start_s
            if self.flow is not None and self.flow.read_paused:
                self._last_chunk_s = now  # the app is not reading: the client is not the one stalling
            silent_s = now - self._last_chunk_s
            if elapsed >= limits.body_timeout_s:
                self._reject(408, f"request body not received within {limits.body_timeout_s:g} s")
            elif silent_s >= limits.body_chunk_timeout_s:
                self._reject(408, f"request body stalled for {limits.body_chunk_timeout_s:g} s")
            else:  # next check when this silence would reach the limit: a stall is cut on time, not late
                left_s = min(limits.body_chunk_timeout_s - silent_s, limits.body_timeout_s - elapsed)
                self._arm(left_s, self._body_tick)

        def _reject(self, status: int, message: str) -> None:
            """Answer ``status`` (unless a response already started) and close; the app, if running,
            sees a disconnect."""
            self._rejected = True
            self._disarm()
            cycle = self.cycle
            answered = cycle is not None and cycle.response_started
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True
                cycle.message_event.set()
            if self.transport is not None and not self.transport.is_closing():
                if not answered:
                    self.transport.write(error_bytes(status, message))
                self.transport.close()

        # --- connection ----------------------------------------------------------------------------------
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > self.limits.max_connections:
                self._reject(503, f"more than {self.limits.max_connections} connections")
                return
            self._arm(self.limits.header_timeout_s, self._header_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._rejected:
                return
            super().data_received(data)
            if self._awaiting_headers and not self._rejected:
                self._header_bytes += len(data)
                if self._header_bytes > self.limits.max_header_bytes + 1024:  # + the request line's slack
                    self._reject(431, f"request headers exceed {self.limits.max_header_bytes} bytes")

        # --- parser callbacks ----------------------------------------------------------------------------
        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._awaiting_headers = True
            self._header_bytes = self._header_size = self._header_count = 0
            if self._timer is None:  # a follow-up request on a kept-alive connection
                self._arm(self.limits.header_timeout_s, self._header_timeout)

        def on_url(self, url: bytes) -> None:
            self._header_size += len(url)
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            if self._rejected:
                return
            self._header_size += len(name) + len(value)
            self._header_count += 1
            limits = self.limits
            if self._header_count > limits.max_headers:
                self._reject(431, f"more than {limits.max_headers} request headers")
            elif self._header_size > limits.max_header_bytes:
                self._reject(431, f"request headers exceed {limits.max_header_bytes} bytes")
            else:
                super().on_header(name, value)

        def on_headers_complete(self) -> None:
            if self._rejected:
                return
            self._awaiting_headers = False
            self._body_start_s = self._last_chunk_s = self.loop.time()
            self._arm(min(self.limits.body_chunk_timeout_s, self.limits.body_timeout_s), self._body_tick)
            super().on_headers_complete()
            self._num_requests += 1
            if self._num_requests >= self.limits.max_requests_per_connection and self.cycle is not None:
                self.cycle.keep_alive = False

        def on_body(self, body: bytes) -> None:
            if not self._rejected:
                self._last_chunk_s = self.loop.time()
                super().on_body(body)

        def on_message_complete(self) -> None:
            if not self._rejected:
                self._disarm()
                super().on_message_complete()

    PROTOCOL: type[asyncio.Protocol] = GuardedHttpProtocol
else:  # pragma: no cover
    PROTOCOL = H11Protocol


class GatewayServer(uvicorn.Server):
    """uvicorn's server plus SIGHUP reloads and a shutdown bounded by ``shutdown_grace_s`` + a margin."""

    def __init__(self, config: GatewayUvicornConfig, reloader: Reloader | None = None) -> None:
        super().__init__(config)
        self.limits = config.limits
        self.reloader = reloader
        self._reloads: set[asyncio.Task[bool]] = set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            if self.reloader is None or threading.current_thread() is not threading.main_thread():
                yield
                return
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGHUP, self.request_reload)
            try:
                yield
            finally:
                loop.remove_signal_handler(signal.SIGHUP)

    def request_reload(self) -> None:
        """SIGHUP: reload the config file in the background (reloads run one at a time)."""
        if self.reloader is None:
            return
        task = asyncio.ensure_future(self.reloader.reload())
        self._reloads.add(task)
        task.add_done_callback(self._reloads.discard)

    async def shutdown(self, sockets: list[Any] | None = None) -> None:
        if self.reloader is not None:
            await self.reloader.close()
        deadline_s = self.limits.shutdown_grace_s + SHUTDOWN_MARGIN_S
        try:
            await asyncio.wait_for(super().shutdown(sockets), timeout=deadline_s)
        except TimeoutError:
            log.error("shutdown took longer than %.0f s; exiting anyway", deadline_s)


def build_server(gateway: Gateway, host: str, port: int, reloader: Reloader | None = None) -> GatewayServer:
    """A server for ``gateway.app`` on ``host:port`` (``serve()`` it in a running loop, or ``run()`` it)."""
    limits = gateway.config.server
    config = GatewayUvicornConfig(
        gateway.app,
        limits,
        host=host,
        port=port,
        http=PROTOCOL,
        lifespan="on",
        log_level="warning",
        access_log=False,  # uvicorn formats each line's fields even when the level drops it
        timeout_keep_alive=limits.keep_alive_s,
        timeout_graceful_shutdown=limits.shutdown_grace_s,
        h11_max_incomplete_event_size=limits.max_header_bytes,
    )
    return GatewayServer(config, reloader)


def listen(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """The listening socket, bound before anything is announced: a busy port or a bad address is one
    ``ConfigError`` naming it (uvicorn would log it and exit after the URL was already printed).

    Made with ``IPPROTO_TCP`` named, not by ``socket.create_server`` (protocol 0): asyncio's own loop turns
    Nagle's algorithm off (``TCP_NODELAY``) only on connections whose socket says TCP, and an accepted
    connection inherits the listener's protocol. With protocol 0, a response written in parts waited for the
    client's delayed ACK: one httpx client through the gateway on asyncio's loop took 44 ms per completion
    against 1.0 ms (``test_server.py`` holds the option). ``slosched serve`` runs on uvloop where it is
    installed (not on Windows), which sets the option on every TCP connection: 0.8 ms either way."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # as uvicorn: "localhost" is 127.0.0.1
    sock: socket.socket | None = None
    try:
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: restart beside TIME_WAIT
        sock.bind((host, port))
        sock.listen(backlog)
        return sock
    except OSError as error:
        if sock is not None:
            sock.close()
        raise ConfigError(f"{host}:{port}", f"cannot listen: {error.strerror or error}") from None


def serve_gateway(
    config: GatewayConfig,
    host: str,
    port: int,
    config_path: Path | None = None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT; with ``config_path``, SIGHUP reloads it. ``announce`` gets the URL
    once the port is bound (port 0: the one the system chose)."""
    sock = listen(host, port)
    with sock:
        if announce is not None:
            bound = sock.getsockname()[1]
            announce(f"http://{f'[{host}]' if ':' in host else host}:{bound}")
        gateway = Gateway(config)
        reloader = Reloader(gateway, config_path) if config_path is not None else None
        build_server(gateway, host, port, reloader).run(sockets=[sock])
