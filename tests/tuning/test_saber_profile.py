"""SABER profiling: timings -> samples, the simulator client, and the OpenAI client on a fake server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.perf.speed_models import UslSpeedModel
from slosched.tuning.openai_client import EndpointError, OpenAIClient
from slosched.tuning.saber_profile import (
    CallTiming,
    ProfileCall,
    SimulatorClient,
    collect_samples,
    profile_calls,
    profile_speed,
    samples_from_timings,
)


def test_samples_average_concurrency_over_each_generation_window() -> None:
    timings = [
        CallTiming(0.0, 1.0, 5.0, 41),  # generates 1..5 s; the other call is in flight 3..5 s
        CallTiming(3.0, 3.5, 7.0, 8),
        CallTiming(0.0, 0.5, 0.5, 1),  # one token: no generation window, no sample
    ]
    samples = samples_from_timings(timings)
    assert len(samples) == 2
    assert samples[0].tokens_per_s == pytest.approx(40 / 4)
    assert samples[0].concurrency == pytest.approx((4 + 2) / 4)
    assert samples[1].concurrency == pytest.approx((1.5 + 3.5) / 3.5)


def test_simulator_profile_fits_usl_well() -> None:
    # SABER's regime: the 2023 engine (splitwise), where each running sequence slows every step. On the
    # current engine (vllm-v1) decode speed barely falls with concurrency and USL fits it far worse (R2 ~0.7).
    instance = InstanceSpec(name="h", gpu="H100", model="Qwen2.5-Coder-7B", max_running=256, stack="splitwise")
    levels = (1, 4, 16, 48)
    calls = profile_calls("code-w3", 300, seed=1)
    profile = profile_speed(SimulatorClient(instance, seed=1), calls, levels, target_samples=240)
    assert profile.num_samples >= 200
    usl = profile.model("usl")
    assert isinstance(usl, UslSpeedModel)
    assert profile.fits["usl"].r2 >= 0.95
    assert 60.0 < usl.speed(1.0) < 120.0 and usl.speed(48.0) < usl.speed(4.0)
    with pytest.raises(ConfigError, match=r"need 1250 calls"):
        collect_samples(SimulatorClient(instance), calls, (1, 600), target_samples=100)


class _FakeVllm(BaseHTTPRequestHandler):
    """Streams ``max_tokens`` one-token chunks; each token takes longer the more calls are in flight."""

    in_flight = 0
    lock = threading.Lock()
    bodies: ClassVar[list[dict[str, object]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeVllm.bodies.append(body)
        if body.get("model") != "coder":
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b'{"error": "unknown model"}')
            return
        with _FakeVllm.lock:
            _FakeVllm.in_flight += 1
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for _ in range(int(body["max_tokens"])):
                time.sleep(0.002 * _FakeVllm.in_flight)
                self._event({"choices": [{"index": 0, "text": " x"}]})
            self._event({"choices": [], "usage": {"completion_tokens": body["max_tokens"]}})
            self.wfile.write(b"data: [DONE]\n\n")
        finally:
            with _FakeVllm.lock:
                _FakeVllm.in_flight -= 1

    def _event(self, event: dict[str, object]) -> None:
        self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def fake_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeVllm)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_openai_client_streams_and_measures_speed(fake_server: str) -> None:
    client = OpenAIClient(fake_server, "coder")
    calls = [ProfileCall(input_tokens=5, output_tokens=12)] * 4
    alone = client.run_closed_loop(calls[:2], concurrency=1)
    together = client.run_closed_loop(calls, concurrency=4)
    assert [timing.output_tokens for timing in alone + together] == [12] * 6
    for timing in alone + together:
        assert timing.start_s <= timing.first_token_s <= timing.finish_s
    assert _FakeVllm.bodies[-1]["stream"] is True and _FakeVllm.bodies[-1]["prompt"] == " hello" * 5
    slow = samples_from_timings(together)
    fast = samples_from_timings(alone)
    assert max(s.concurrency for s in slow) > 2.0 > max(s.concurrency for s in fast)
    assert min(s.tokens_per_s for s in fast) > max(s.tokens_per_s for s in slow)


def test_openai_client_reports_endpoint_errors(fake_server: str) -> None:
    with pytest.raises(EndpointError, match=r"404"):
        OpenAIClient(fake_server, "other").run_closed_loop([ProfileCall(3, 3)], concurrency=1)
    with pytest.raises(ConfigError, match=r"base_url"):
        OpenAIClient("localhost:8000", "coder")
