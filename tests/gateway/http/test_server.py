"""The gateway's HTTP server under hostile clients: raw sockets against the real server on a free port
(uvicorn ``Server`` on its own loop in a thread), and ``slosched serve`` in a subprocess for signals."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from slosched.devtools.stub import StubBackend, StubBehaviour, free_port, serve_app
from slosched.gateway.http.app import Gateway
from slosched.gateway.http.server import build_server, listen
from slosched.gateway.ops.config import parse_config
from tests.gateway.helpers import stub_config

_LIMITS = {"header_timeout_s": 0.5, "body_chunk_timeout_s": 0.5, "body_timeout_s": 2.0, "max_connections": 150}
_COMPLETION = b'{"model": "tiny", "prompt": "hi", "max_tokens": 2}'


@dataclass
class Served:
    port: int
    stub: StubBackend

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        sock.settimeout(5)
        return sock


@contextlib.contextmanager
def served(**limits: Any) -> Iterator[Served]:
    """A stub backend and the gateway's real server in front of it, on a loop in a daemon thread."""
    stub = StubBackend()
    # Bound now and handed to the server: a port merely chosen here could go to the stub started below.
    sock = listen("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    ready, stop = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    async def run() -> None:
        async with serve_app(stub.app()) as stub_url:
            config = parse_config(stub_config([stub_url], server={**_LIMITS, **limits}))
            server = build_server(Gateway(config), "127.0.0.1", port)
            task = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started and not task.done():
                await asyncio.sleep(0.01)
            ready.set()
            while not stop.is_set() and not task.done():
                await asyncio.sleep(0.02)
            server.should_exit = True
            await task

    def main() -> None:
        try:
            asyncio.run(run())
        except BaseException as error:  # surfaced by the fixture, not lost in the thread
            failure.append(error)
            ready.set()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    assert ready.wait(20) and not failure, failure
    try:
        yield Served(port, stub)
    finally:
        stop.set()
        thread.join(20)


def read_all(sock: socket.socket, limit_s: float = 5.0) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when (seconds from now) it closed."""
    started = time.monotonic()
    data = b""
    sock.settimeout(limit_s)
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            data += chunk
    return data, time.monotonic() - started


def post_headers(length: int, extra: str = "") -> bytes:
    return (
        f"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"content-length: {length}\r\n{extra}\r\n"
    ).encode()


def test_half_sent_headers_are_answered_408_and_closed_within_the_timeout() -> None:
    with served() as server, server.connect() as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\n")
        data, took_s = read_all(sock)
    assert data.startswith(b"HTTP/1.1 408 ")
    assert b"request_timeout" in data
    assert took_s < 2.0


def test_a_silent_connection_is_closed_within_the_header_timeout() -> None:
    with served() as server, server.connect() as sock:
        data, took_s = read_all(sock)
    assert took_s < 2.0
    assert data == b"" or data.startswith(b"HTTP/1.1 408 ")


def test_half_sent_body_is_answered_408() -> None:
    with served() as server, server.connect() as sock:
        sock.sendall(post_headers(len(_COMPLETION)) + _COMPLETION[:10])
        data, took_s = read_all(sock)
    assert data.startswith(b"HTTP/1.1 408 ")
    assert b"stalled" in data
    assert took_s < 2.0


def test_a_body_that_keeps_trickling_is_cut_at_the_total_body_timeout() -> None:
    with served(body_timeout_s=1.0) as server, server.connect() as sock:
        sock.sendall(post_headers(len(_COMPLETION)))
        started = time.monotonic()
        with contextlib.suppress(OSError):
            for byte in _COMPLETION[:-1]:
                sock.sendall(bytes([byte]))
                time.sleep(0.2)
                if time.monotonic() - started > 3:
                    break
        data, _ = read_all(sock)
    assert data.startswith(b"HTTP/1.1 408 ")
    assert time.monotonic() - started < 3.0


def test_a_body_in_chunks_with_short_pauses_is_served() -> None:
    with served() as server, server.connect() as sock:
        sock.sendall(post_headers(len(_COMPLETION), "connection: close\r\n") + _COMPLETION[:10])
        time.sleep(0.3)
        sock.sendall(_COMPLETION[10:])
        data, _ = read_all(sock)
    assert data.startswith(b"HTTP/1.1 200 "), data[:200]
    assert b'"choices"' in data


def test_an_8_mb_header_is_refused_with_431_or_closed() -> None:
    with served() as server, server.connect() as sock:
        sent = 0
        with contextlib.suppress(OSError):
            sock.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\nx-big: ")
            for _ in range(8 * 16):  # 8 MB in 64 KiB pieces; the server closes long before the end
                sock.sendall(b"a" * 65536)
                sent += 65536
        data, _ = read_all(sock)
    assert data.startswith(b"HTTP/1.1 431 ") or data == b""
    assert sent < 8 * 1024 * 1024


def test_too_many_headers_are_refused_with_431() -> None:
    with served(max_headers=20) as server, server.connect() as sock:
        headers = "".join(f"x-h{index}: v\r\n" for index in range(30))
        sock.sendall(f"GET /health HTTP/1.1\r\nhost: x\r\n{headers}\r\n".encode())
        data, _ = read_all(sock)
    assert data.startswith(b"HTTP/1.1 431 ")
    assert b"more than 20 request headers" in data


def test_connections_over_the_cap_get_503() -> None:
    with served(max_connections=3) as server:
        held = [server.connect() for _ in range(3)]
        try:
            with server.connect() as extra:
                data, _ = read_all(extra)
        finally:
            for sock in held:
                sock.close()
    assert data.startswith(b"HTTP/1.1 503 ")


def test_a_connection_closes_after_its_max_requests() -> None:
    with served(max_requests_per_connection=2) as server, server.connect() as sock:
        request = b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n"
        sock.sendall(request + request)  # pipelined; the server closes after the second answer
        data, took_s = read_all(sock)
    assert data.count(b"HTTP/1.1 200 ") == 2
    assert data.lower().count(b"connection: close") == 1
    assert took_s < 2.0


def test_100_slow_sockets_do_not_block_a_real_request() -> None:
    with served(header_timeout_s=10.0) as server:
        slow = [server.connect() for _ in range(100)]
        try:
            for sock in slow:
                sock.sendall(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\n")
            started = time.monotonic()
            response = httpx.post(f"{server.url}/v1/completions", content=_COMPLETION, timeout=5)
            took_s = time.monotonic() - started
        finally:
            for sock in slow:
                sock.close()
    assert response.status_code == 200
    assert took_s < 1.0


def test_a_normal_completion_passes_through_the_guarded_server() -> None:
    with served() as server, httpx.Client(base_url=server.url, timeout=5) as client:
        for _ in range(3):  # keep-alive: the header timer re-arms for each follow-up request
            assert client.post("/v1/completions", content=_COMPLETION).status_code == 200
        time.sleep(0.7)  # longer than the header timeout while idle between requests
        assert client.get("/health").status_code == 200
    assert len(server.stub.received) == 3


def test_connections_the_listening_socket_accepts_send_without_nagles_delay() -> None:
    """asyncio turns Nagle's algorithm off only where the accepted socket says TCP; with ``create_server``'s
    protocol 0 it did not, and a sequential client (httpx, the OpenAI SDK) waited 44 ms per request for its
    own delayed ACK (``listen``'s docstring)."""
    nodelay: list[int] = []

    async def scenario() -> None:
        sock = listen("127.0.0.1", 0)
        accepted = asyncio.Event()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                conn = transport.get_extra_info("socket")
                nodelay.append(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()
                accepted.set()

        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
            await asyncio.wait_for(accepted.wait(), 5)
            writer.close()

    asyncio.run(scenario())
    assert nodelay and nodelay[0] != 0


def test_a_busy_port_is_one_config_error_naming_it() -> None:
    from slosched.core.errors import ConfigError

    with listen("127.0.0.1", 0) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"127.0.0.1:{port}"):
            listen("127.0.0.1", port).close()


@pytest.mark.parametrize("field", ["header_timeout_s", "max_header_bytes", "max_connections"])
def test_bad_server_limits_name_the_field(field: str) -> None:
    from slosched.core.errors import ConfigError

    with pytest.raises(ConfigError, match=f"server.{field}"):
        parse_config(stub_config(["http://127.0.0.1:9"], server={field: 0}))


def test_the_stub_behaviour_can_hang() -> None:  # the signal tests below rely on it
    assert StubBehaviour(first_byte_delay_s=60.0).first_byte_delay_s == 60.0


# --- signals: ``slosched serve`` in a subprocess --------------------------------------------------------


@contextlib.contextmanager
def stub_servers(*behaviours: StubBehaviour) -> Iterator[list[tuple[StubBackend, str]]]:
    """Stub backends on their own loop in a daemon thread (the gateway runs in another process)."""
    stubs = [StubBackend(name=f"stub{index}", behaviour=behaviour) for index, behaviour in enumerate(behaviours)]
    urls: list[str] = []
    ready, stop = threading.Event(), threading.Event()

    async def run() -> None:
        async with contextlib.AsyncExitStack() as stack:
            urls.extend([await stack.enter_async_context(serve_app(stub.app())) for stub in stubs])
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)

    thread = threading.Thread(target=lambda: asyncio.run(run()), daemon=True)
    thread.start()
    assert ready.wait(20)
    try:
        yield list(zip(stubs, urls, strict=True))
    finally:
        stop.set()
        thread.join(10)


def write_config(path: Path, backends: dict[str, str], keys: list[str], **server: float) -> None:
    config = stub_config(list(backends.values()), api_keys=keys, server={"shutdown_grace_s": 1.0, **server})
    for entry, name in zip(config["backends"], backends, strict=True):
        entry["name"] = name
    path.write_text(yaml.safe_dump(config))


@contextlib.contextmanager
def gateway_process(config_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    command = [sys.executable, "-m", "slosched.cli", "serve", str(config_path), "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=config_path.parent)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and process.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        assert process.poll() is None, process.stderr.read() if process.stderr else b""
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def call_in_background(url: str, key: str, results: list[Any]) -> threading.Thread:
    def call() -> None:
        try:
            headers = {"authorization": f"Bearer {key}"}
            results.append(httpx.post(f"{url}/v1/completions", content=_COMPLETION, headers=headers, timeout=30))
        except httpx.HTTPError as error:
            results.append(error)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread


def wait_for(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_sigterm_with_a_hung_backend_exits_within_the_grace_deadline(tmp_path: Path) -> None:
    with stub_servers(StubBehaviour(first_byte_delay_s=120.0)) as [(stub, stub_url)]:
        config_path = tmp_path / "gateway.yaml"
        write_config(config_path, {"hung": stub_url}, ["k1"], shutdown_grace_s=1.0)
        with gateway_process(config_path) as (process, url):
            results: list[Any] = []
            caller = call_in_background(url, "k1", results)
            wait_for(lambda: len(stub.received) == 1)
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            process.wait(15)
            took_s = time.monotonic() - started
            caller.join(5)
    assert took_s < 1.0 + 3.0  # the grace, plus stopping the app
    assert results, "the in-flight call got no answer at all"
    assert not isinstance(results[0], httpx.Response) or results[0].status_code >= 500


def test_sighup_adds_a_backend_and_a_key_without_dropping_an_in_flight_call(tmp_path: Path) -> None:
    slow, fast = StubBehaviour(token_delay_s=0.6), StubBehaviour()
    with stub_servers(slow, fast) as [(old_stub, old_url), (new_stub, new_url)]:
        config_path = tmp_path / "gateway.yaml"
        write_config(config_path, {"old": old_url}, ["k1"])
        with gateway_process(config_path) as (process, url):
            assert (
                httpx.post(f"{url}/v1/completions", content=_COMPLETION, headers={"x-api-key": "k2"}).status_code == 401
            )
            results: list[Any] = []
            caller = call_in_background(url, "k1", results)  # 2 tokens at 0.6 s: in flight across the reload
            wait_for(lambda: len(old_stub.received) == 1)
            write_config(config_path, {"new": new_url}, ["k1", "k2"])
            process.send_signal(signal.SIGHUP)
            wait_for(lambda: "new" in httpx.get(f"{url}/health").json()["backends"])
            # While "old" drains, every view of the backends still answers (/metrics reads its ejection state).
            assert httpx.get(f"{url}/health").json()["backends"]["old"]["ejected"] is False
            assert httpx.get(f"{url}/metrics").status_code == 200
            answer = httpx.post(f"{url}/v1/completions", content=_COMPLETION, headers={"x-api-key": "k2"}, timeout=5)
            caller.join(10)
            wait_for(lambda: "old" not in httpx.get(f"{url}/health").json()["backends"])  # drained, then dropped
            config_path.write_text("backends: []\n")  # invalid: logged and ignored
            process.send_signal(signal.SIGHUP)
            time.sleep(0.5)
            again = httpx.post(f"{url}/v1/completions", content=_COMPLETION, headers={"x-api-key": "k2"}, timeout=5)
            assert process.poll() is None
    assert answer.status_code == 200 and len(new_stub.received) == 2
    assert isinstance(results[0], httpx.Response) and results[0].status_code == 200
    assert len(old_stub.received) == 1
    assert again.status_code == 200
