"""``slosched bench soak``: the gateway under a steady mixed load for 10 minutes (``--quick``: 30 s),
its resident memory over time, and the proof that every request ended in exactly one terminal state.

The stub backend and the gateway run as subprocesses (``bench.gateway``'s helpers); this process sends an
open-loop mix at a fixed rate: plain completions (some with SLO headers), streamed completions, chat calls,
job flows (a workflow: create, one stage, complete; or a relQuery) and a few malformed requests (which must
get a 4xx). The gateway's VmRSS is sampled every few seconds; ``rss_start_mb`` is taken after a warm-up.

Terminal accounting is checked on both sides. Client side: every request sent is counted once in one
class (2xx, 4xx, 429, 5xx, timeout, conn_error); ``lost`` = sent - counted, and ``unexpected`` counts
valid requests without a 2xx and malformed ones without a 4xx. Gateway side, once idle: accepted calls =
calls in a terminal outcome (``slosched:requests_*``), and jobs created = jobs in a terminal state.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from slosched.bench.gateway import _gateway_config, _process, _rss_mb
from slosched.bench.loadgen import _Pool
from slosched.contract import HEADER_DEADLINE_MS, HEADER_TENANT, HEADER_TPOT_MS, HEADER_TTFT_MS
from slosched.devtools.stub import free_port
from slosched.evaluation.formatting import print_figures

GROWTH_BOUND_MB = 20.0
TERMINAL_CLASSES = ("2xx", "4xx", "429", "5xx", "timeout", "conn_error", "other")
_RESULTS = Path("docs/results")
_TIMEOUT_S = 10.0
_SOAK_MAX_JOBS = 500  # finished jobs kept for GET /v1/jobs/{id}: filled during the warm-up, then flat
# (kind, weight): the share of each kind of operation in the open loop.
MIX = (("plain", 50), ("slo", 15), ("stream", 15), ("chat", 8), ("job", 6), ("malformed", 6))


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MB (VmRSS of /proc/PID/status)."""
    return _rss_mb(pid)


def classify(status: int | None, timed_out: bool = False) -> str:
    """The terminal class of one request: its HTTP status family, or timeout / conn_error (no status)."""
    if timed_out:
        return "timeout"
    if status is None:
        return "conn_error"
    if status == 429:
        return "429"
    for low, name in ((200, "2xx"), (400, "4xx"), (500, "5xx")):
        if low <= status < low + 100:
            return name
    return "other"


@dataclass(slots=True)
class Accounting:
    """Client-side terminal accounting: ``sent`` counts requests when sent, ``terminal`` when they end."""

    sent: int = 0
    terminal: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TERMINAL_CLASSES, 0))
    unexpected: int = 0

    def end(self, status: int | None, timed_out: bool, expect_4xx: bool = False) -> str:
        kind = classify(status, timed_out)
        self.terminal[kind] += 1
        if kind != ("4xx" if expect_4xx else "2xx"):
            self.unexpected += 1
        return kind

    @property
    def lost(self) -> int:
        return self.sent - sum(self.terminal.values())


def request_bytes(host: str, port: int, path: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    """A pre-encoded HTTP/1.1 POST (keep-alive) with extra headers."""
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _payloads(host: str, port: int) -> dict[str, list[tuple[bytes, bool]]]:
    """Per raw kind, the requests it cycles through: (bytes, expects a 4xx)."""
    plain = json.dumps({"model": "tiny", "prompt": "hello soak", "max_tokens": 8}).encode()
    stream = json.dumps({"prompt": "stream me", "max_tokens": 16, "stream": True}).encode()
    chat = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}).encode()

    def post(path: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
        return request_bytes(host, port, path, body, headers)

    slo = [{HEADER_DEADLINE_MS: "2000", HEADER_TENANT: "gold"}, {HEADER_TTFT_MS: "500", HEADER_TPOT_MS: "50"}]
    return {
        "plain": [(post("/v1/completions", plain), False)],
        "slo": [(post("/v1/completions", plain, headers), False) for headers in slo],
        "stream": [(post("/v1/completions", stream), False)],
        "chat": [(post("/v1/chat/completions", chat), False)],
        "malformed": [
            (post("/v1/completions", b"{not json"), True),
            (post("/v1/completions", json.dumps({"prompt": "x", "max_tokens": "many"}).encode()), True),
            (post("/v1/completions", plain, {HEADER_DEADLINE_MS: "soon"}), True),
            (post("/v1/chat/completions", json.dumps({"messages": "hi"}).encode()), True),
            (post("/v1/jobs", json.dumps({"kind": "batch"}).encode()), True),
        ],
    }


class SoakLoad:
    """The open-loop load: one operation per tick, kinds drawn from ``MIX`` by a seeded generator."""

    def __init__(self, url: str, accounting: Accounting, seed: int = 0) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.url, self.accounting = url, accounting
        self.pool = _Pool(host, int(port))
        self.payloads = _payloads(host, int(port))
        # Enough connections for every flow that can be in flight (12 flows/s x 10 s timeouts): a pool wait
        # would count as a client-side timeout, not the gateway's.
        limits = httpx.Limits(max_connections=1024, max_keepalive_connections=64)
        self.http = httpx.AsyncClient(base_url=url, timeout=_TIMEOUT_S, limits=limits)
        self.rng = random.Random(seed)
        self.jobs_created = 0
        self._cursor = dict.fromkeys(self.payloads, 0)
        self._kinds, self._weights = zip(*MIX, strict=True)

    def next_operation(self) -> Callable[[], Coroutine[Any, Any, None]]:
        kind = self.rng.choices(self._kinds, self._weights)[0]
        if kind == "job":
            return self.job_flow
        options = self.payloads[kind]
        payload, expect_4xx = options[self._cursor[kind] % len(options)]
        self._cursor[kind] += 1
        return lambda: self.raw(payload, expect_4xx)

    async def raw(self, payload: bytes, expect_4xx: bool) -> None:
        self.accounting.sent += 1
        try:
            status: int | None = await asyncio.wait_for(self.pool.request(payload), _TIMEOUT_S)
        except TimeoutError:
            self.accounting.end(None, True, expect_4xx)
            return
        except (OSError, ConnectionError, ValueError, IndexError, asyncio.IncompleteReadError):
            status = None
        self.accounting.end(status, False, expect_4xx)

    async def _post(self, path: str, body: dict[str, Any]) -> httpx.Response | None:
        self.accounting.sent += 1
        try:
            response = await self.http.post(path, json=body)
        except httpx.TimeoutException:
            self.accounting.end(None, True)
            return None
        except httpx.HTTPError:
            self.accounting.end(None, False)
            return None
        self.accounting.end(response.status_code, False)
        return response

    async def job_flow(self) -> None:
        """A workflow (create, a stage of two calls, complete) or, one time in four, a 3-row relQuery."""
        if self.rng.random() < 0.25:
            rows = [{"r": index} for index in range(3)]
            body = {"kind": "relquery", "slo_s": 30, "template": "Q {r}", "rows": rows, "params": {"max_tokens": 4}}
            created = await self._post("/v1/jobs", body)
            self.jobs_created += created is not None and created.status_code == 201
            return
        created = await self._post("/v1/jobs", {"kind": "workflow", "slo_s": 30, "template": "soak"})
        if created is None or created.status_code != 201:
            return
        self.jobs_created += 1
        job = created.json()["id"]
        calls = [{"prompt": "a", "max_tokens": 4}, {"messages": [{"role": "user", "content": "b"}], "max_tokens": 4}]
        stage = await self._post(f"/v1/jobs/{job}/stages", {"name": "s", "calls": calls})
        if stage is not None and stage.status_code == 200:
            await self._post(f"/v1/jobs/{job}/complete", {})

    async def close(self) -> None:
        self.pool.close()
        await self.http.aclose()


async def drive(
    load: SoakLoad, rate: float, duration_s: float, sample: Callable[[float], None], sample_every_s: float
) -> None:
    """``rate`` operations/s for ``duration_s`` (open loop), ``sample(elapsed)`` every ``sample_every_s``;
    then wait (bounded) for every operation to end."""
    pending: set[asyncio.Task[None]] = set()
    start = time.perf_counter()
    next_sample = 0.0
    for index in range(int(rate * duration_s)):
        due = index / rate
        now = time.perf_counter() - start
        if now >= next_sample:
            sample(now)
            next_sample += sample_every_s
        if due > now:
            await asyncio.sleep(due - now)
        task = asyncio.create_task(load.next_operation()())
        pending.add(task)
        task.add_done_callback(pending.discard)
    if pending:  # every request has its own timeout; a flow has at most 3, so this bounds the drain
        await asyncio.wait(pending, timeout=4 * _TIMEOUT_S)
    sample(time.perf_counter() - start)


def gateway_accounting(metrics_text: str) -> dict[str, float]:
    """accepted calls, calls in a terminal outcome, jobs in a terminal state, from /metrics."""
    totals = {"accepted": 0.0, "terminal": 0.0, "jobs_terminal": 0.0}
    names = {
        "slosched:requests_accepted_total": "accepted",
        "slosched:requests_total": "terminal",
        "slosched:jobs_total": "jobs_terminal",
    }
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            key = names.get(sample.name)
            if key is not None:
                totals[key] += sample.value
    return totals


def not_completed(metrics_text: str) -> dict[str, float]:
    """The gateway's calls that ended other than ``completed``, keyed ``outcome/reason`` (why 5xx happened)."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == "slosched:requests_total" and sample.labels.get("outcome") != "completed":
                key = f"{sample.labels.get('outcome')}/{sample.labels.get('reason')}"
                found[key] = found.get(key, 0.0) + sample.value
    return found


def _slope_per_min(samples: list[tuple[float, float]]) -> float:
    """Least-squares trend of RSS over time (MB per minute): a steady leak shows here even when the
    end-minus-start difference is small; NaN for fewer than 3 samples."""
    if len(samples) < 3:
        return float("nan")
    times, values = np.array(samples).T
    return float(np.polyfit(times, values, 1)[0] * 60.0)


async def _scrape_accounting(http: httpx.AsyncClient) -> tuple[dict[str, float], dict[str, float]]:
    """The gateway's accounting and its calls not completed by outcome/reason; NaNs (a failed check) and
    nothing when /metrics cannot be read."""
    try:
        response = await http.get("/metrics")
        response.raise_for_status()
        return gateway_accounting(response.text), not_completed(response.text)
    except (httpx.HTTPError, ValueError):
        return dict.fromkeys(("accepted", "terminal", "jobs_terminal"), float("nan")), {}


async def _soak_async(
    url: str, pid: int, rate: float, duration_s: float, warmup_s: float, sample_every_s: float
) -> dict[str, Any]:
    accounting = Accounting()
    load = SoakLoad(url, accounting)
    samples: list[tuple[float, float, int]] = []  # (elapsed s, RSS MB, unexpected answers so far)
    try:

        def record(elapsed_s: float) -> None:
            samples.append((elapsed_s, rss_mb(pid), accounting.unexpected))

        await drive(load, rate, duration_s, record, sample_every_s)
        await asyncio.sleep(1.0)  # let the gateway finish its bookkeeping (background relQueries)
        side, outcomes = await _scrape_accounting(load.http)
    finally:
        await load.close()
    after = [(t, rss) for t, rss, _ in samples if t >= warmup_s] or [samples[-1][:2]]
    rss_after = [rss for _, rss in after]
    return {
        "duration_s": duration_s,
        "warmup_s": warmup_s,
        "rate_rps": rate,
        "rss_start_mb": rss_after[0],
        "rss_end_mb": rss_after[-1],
        "growth_mb": rss_after[-1] - rss_after[0],
        "rss_peak_mb": max(rss_after),
        "slope_mb_per_min": _slope_per_min(after),
        "requests": accounting.sent,
        "terminal": dict(accounting.terminal),
        "lost": accounting.lost,
        "unexpected": accounting.unexpected,
        "gateway": {
            "accepted": side["accepted"],
            "terminal": side["terminal"],
            "lost": side["accepted"] - side["terminal"],
            "jobs_created": load.jobs_created,
            "jobs_terminal": side["jobs_terminal"],
            "not_completed": outcomes,
        },
        "samples": [[round(t, 2), round(rss, 2), bad] for t, rss, bad in samples],
    }


def soak(duration_s: float, warmup_s: float, rate: float, sample_every_s: float) -> dict[str, Any]:
    """Start a stub and a gateway (subprocesses), run the load, stop them; the figures (see the module)."""
    stub_port, gateway_port = free_port(), free_port()
    stub_url, gateway_url = f"http://127.0.0.1:{stub_port}", f"http://127.0.0.1:{gateway_port}"
    config_path = Path(f"/tmp/slosched-bench-soak-{gateway_port}.json")
    _gateway_config(config_path, stub_url, gateway_port)
    config = json.loads(config_path.read_text())
    # The load names tenants in x-tenant on an open gateway: trusted, as in any dev/bench setup.
    config_path.write_text(json.dumps({**config, "max_jobs": _SOAK_MAX_JOBS, "trust_tenant_header": True}))
    stub_cmd = [sys.executable, "-m", "slosched.devtools.stub", "--port", str(stub_port)]
    gateway_cmd = [sys.executable, "-m", "slosched.cli", "serve", str(config_path)]
    try:
        with _process(stub_cmd, f"{stub_url}/health"), _process(gateway_cmd, f"{gateway_url}/health") as gateway:
            figures = asyncio.run(_soak_async(gateway_url, gateway.pid, rate, duration_s, warmup_s, sample_every_s))
    finally:
        config_path.unlink(missing_ok=True)
    gateway_side = figures["gateway"]
    figures["passed"] = bool(
        figures["growth_mb"] < GROWTH_BOUND_MB
        and figures["lost"] == 0
        and gateway_side["lost"] == 0
        and gateway_side["jobs_terminal"] == gateway_side["jobs_created"]
    )
    return figures


def run(quick: bool) -> dict[str, Any]:
    duration_s, warmup_s, sample_every_s = (30.0, 5.0, 1.0) if quick else (600.0, 60.0, 5.0)
    figures = soak(duration_s, warmup_s, rate=200.0, sample_every_s=sample_every_s)
    shown = {k: v for k, v in figures.items() if k not in ("samples", "terminal", "gateway")}
    print_figures("gateway soak (stub backend)", shown | {f"terminal {k}": v for k, v in figures["terminal"].items()})
    print_figures("gateway-side accounting", figures["gateway"])
    verdict = "PASS" if figures["passed"] else "FAIL"
    lost = f"lost {figures['lost']} client-side / {figures['gateway']['lost']:.0f} gateway-side"
    growth = f"growth {figures['growth_mb']:.1f} MB (bound {GROWTH_BOUND_MB:.0f} MB)"
    print(f"soak {verdict}: {growth}, {lost}", file=sys.stderr)
    if not quick:
        from slosched.bench.soak.report import write_report

        write_report(figures, GROWTH_BOUND_MB, _RESULTS)
    return figures
