"""``slosched bench engine-live``: one vLLM CPU server (tiny model) running the scheduler plugin; stock
vLLM scheduling (the plugin in ``bypass``: vLLM's own scheduler, the plugin only measures) against the
plugin policies, switched live through the control file, on traces where the engine policy should matter:
relQueries of mixed sizes, chat with mixed deadlines, and multi-stage workflows.

The server runs ``--max-num-seqs 8`` so queues form (with vLLM's default 128 slots nothing would ever wait
on this load and every ordering would be equivalent). A short calibration measures the per-request speed
alone and with 8 running (the SLOs and SABER's speed model come from it). Figures: per (trace, policy)
SLO attainment, mean and P90 job latency; the plugin's own time per step next to vLLM's ``schedule()``
time and the model step time (from the plugin's state export, differenced over each run). The full run
writes docs/results/engine-live.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

import slosched.bench.engine_live.traces as traces
from slosched.bench.engine_live.traces import LiveCall, LiveJob, Replay, ServerSpeed
from slosched.devtools.up import wait_ready
from slosched.devtools.vllm_launch import PluginServer, start_plugin_servers, stop_plugin_servers
from slosched.evaluation.formatting import fixed, print_figures
from slosched.evaluation.rows import row_finished
from slosched.perf.speed_models import SpeedSample, fit_usl
from slosched.vllm_ext.control import write_control
from slosched.vllm_ext.state_export import read_state

SLOTS = 8
RESULTS = Path("docs/results/engine-live.md")


def apply_control(server: PluginServer, document: dict[str, Any], timeout_s: float = 60.0) -> None:
    """Write the control file; keep the engine stepping (one-token requests) until its export shows it."""
    version = time.time_ns()
    write_control(server.control_file, {**document, "version": version})
    deadline = time.monotonic() + timeout_s
    next_nudge = 0.0
    while time.monotonic() < deadline:
        if time.monotonic() >= next_nudge:
            body = {"model": "tiny", "prompt": "x", "max_tokens": 1}
            threading.Thread(target=_post, args=(server.url, body), daemon=True).start()
            next_nudge = time.monotonic() + 0.3
        state = read_state(server.state_file)
        if state and state["plugin"]["control_version"] == version:
            if state["plugin"]["control_error"]:
                raise RuntimeError(state["plugin"]["control_error"])
            return
        time.sleep(0.05)
    raise TimeoutError(f"the engine did not apply {document}")


def _post(url: str, body: dict[str, Any]) -> None:
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(f"{url}/v1/completions", json=body, timeout=120)


def calibrate(url: str) -> tuple[ServerSpeed, dict[str, Any]]:
    """Per-request tokens/s at concurrency 1, SLOTS/2 and SLOTS (128 output tokens each), and a USL fit."""
    samples = []
    for width in (1, SLOTS // 2, SLOTS):
        jobs = [LiveJob(f"cal{width}-{i}", "single", 0.0, [[LiveCall(20, 128)]]) for i in range(width)]
        asyncio.run(Replay(url).run(jobs))
        samples += [SpeedSample(float(width), 128 / job.latency_s) for job in jobs if job.latency_s]
    speeds = {
        width: float(np.mean([s.tokens_per_s for s in samples if s.concurrency == width])) for width in (1, SLOTS)
    }
    usl = fit_usl(samples).model
    speed = {"kind": "usl", "lam": usl.lam, "sigma": usl.sigma, "kappa": usl.kappa}  # type: ignore[union-attr]
    return ServerSpeed(speeds[1], speeds[SLOTS], SLOTS), speed


def policies(speed_model: dict[str, Any], server_speed: ServerSpeed, quick: bool) -> dict[str, dict[str, Any]]:
    tpot = 1.5 / server_speed.full_tps
    catalog: dict[str, dict[str, Any]] = {
        "stock": {"bypass": True},
        "urgency": {"preset": "urgency"},
        "relserve": {"preset": "relserve"},
        "saber": {"preset": "saber", "params": {"speed": speed_model}},
        "lens": {"preset": "lens", "params": {"ttft_slo_s": 1.0, "tpot_slo_s": tpot}},
        "static-priority": {"preset": "static-priority"},
    }
    return catalog


def plan(quick: bool, speed: ServerSpeed) -> list[tuple[str, list[LiveJob], list[str]]]:
    """(trace name, jobs, policies) triples; the load is ~1.1x the server's 8-slot token throughput."""
    rng = np.random.default_rng(7)
    capacity = SLOTS * speed.full_tps  # output tokens per second with every slot busy
    scale = 1 if quick else 2
    chat = traces.chat_trace(rng, 40 * scale, 1.1 * capacity / 88.0, speed)
    flows = traces.workflow_trace(rng, 12 * scale, 1.1 * capacity / 250.0, speed)
    rel = traces.relquery_trace(rng, 6 * scale, 1.0, speed)
    if quick:
        return [
            ("chat", chat, ["stock", "urgency", "saber", "lens"]),
            ("workflow", flows, ["stock", "urgency"]),
            ("relquery", rel, ["stock", "relserve"]),
        ]
    return [
        ("chat", chat, ["stock", "urgency", "saber", "lens", "static-priority"]),
        ("workflow", flows, ["stock", "urgency", "saber", "lens"]),
        ("relquery", rel, ["stock", "relserve", "static-priority", "urgency"]),
    ]


def _fresh(jobs: list[LiveJob]) -> list[LiveJob]:
    return [LiveJob(j.id, j.kind, j.arrival_s, j.stages, j.slo_s) for j in jobs]


def _totals(server: PluginServer) -> dict[str, float]:
    state = read_state(server.state_file) or {}
    stats = state.get("plugin", {}).get("stats", {})
    return {**stats.get("totals", {}), "num_steps": stats.get("num_steps", 0)}


def run_policy(server: PluginServer, document: dict[str, Any], jobs: list[LiveJob]) -> dict[str, Any]:
    apply_control(server, document)
    time.sleep(0.3)
    before = _totals(server)
    asyncio.run(Replay(server.url, noise=np.random.default_rng(11)).run(jobs))
    time.sleep(0.6)  # one more export after the last step
    after = _totals(server)
    steps = max(after["num_steps"] - before["num_steps"], 1)
    timed = max(after["num_timed_steps"] - before["num_timed_steps"], 1)
    return {
        **traces.summarize(jobs),
        "serving": traces.serving(jobs),
        "steps": steps,
        "plugin_us_per_step": 1e6 * (after["plugin_s"] - before["plugin_s"]) / steps,
        "vllm_schedule_us_per_step": 1e6 * (after["base_schedule_s"] - before["base_schedule_s"]) / steps,
        "model_step_ms": 1e3 * (after["step_s"] - before["step_s"]) / timed,
    }


def run(quick: bool) -> dict[str, Any]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="slosched-engine-live-") as tmp:
        extra = {"control_poll_s": 0.05, "export_interval_s": 0.2, "bypass": True}
        servers = start_plugin_servers([2], Path(tmp), None, extra, server_args=["--max-num-seqs", str(SLOTS)])
        try:
            wait_ready([servers[0].server], timeout_s=900)
            startup_s = time.monotonic() - started
            figures = _measure(servers[0], quick)
        finally:
            stop_plugin_servers(servers)
    figures["server_start_s"] = startup_s
    figures["wall_s"] = time.monotonic() - started
    _print(figures)
    if not quick:
        write_report(figures)
    return figures


def _measure(server: PluginServer, quick: bool) -> dict[str, Any]:
    server_speed, speed_model = calibrate(server.url)
    catalog = policies(speed_model, server_speed, quick)
    rows = []
    for trace, jobs, names in plan(quick, server_speed):
        for name in names:
            result = run_policy(server, catalog[name], _fresh(jobs))
            rows.append({"trace": trace, "policy": name, **result})
            row_finished(f"{trace}/{name}", rows[-1])  # kept if Ctrl-C stops the rest
    plugin_rows = [row for row in rows if row["policy"] != "stock"]
    return {
        "rows": rows,
        "plugin_us_per_step": float(np.mean([row["plugin_us_per_step"] for row in plugin_rows])),
        "bypass_us_per_step": float(np.mean([row["plugin_us_per_step"] for row in rows if row["policy"] == "stock"])),
        "vllm_schedule_us_per_step": float(np.mean([row["vllm_schedule_us_per_step"] for row in rows])),
        "model_step_ms": float(np.mean([row["model_step_ms"] for row in rows])),
        "speed": {
            "solo_tps": server_speed.solo_tps,
            "full_tps": server_speed.full_tps,
            "slots": SLOTS,
            "usl": speed_model,
        },
    }


def _print(figures: dict[str, Any]) -> None:
    flat: dict[str, Any] = {}
    for row in figures["rows"]:
        key, serving = f"{row['trace']}/{row['policy']}", row["serving"]
        flat[key] = (
            f"SLO {row['slo_attainment']:.0%}  mean {row['mean_latency_s']:.2f} s  "
            f"P90 {row['p90_latency_s']:.2f} s  plugin {row['plugin_us_per_step']:.0f} us/step  "
            f"{fixed(serving['output_throughput'], 1)} tok/s  p99 e2e {fixed(serving['p99_e2el_ms'], 0)} ms"
        )
    for key in (
        "plugin_us_per_step",
        "bypass_us_per_step",
        "vllm_schedule_us_per_step",
        "model_step_ms",
        "server_start_s",
        "wall_s",
    ):
        flat[key] = round(float(figures[key]), 1)
    print_figures("engine-live: vLLM CPU server with the slosched scheduler plugin", flat)


def write_report(figures: dict[str, Any]) -> None:
    lines = [
        "# engine-live: slosched's engine policies inside a real vLLM CPU server",
        "",
        "Generated by `slosched bench engine-live` (full run). One vLLM 0.32.0 CPU server, tiny 2-layer model,",
        f"`--max-num-seqs {SLOTS}`; stock = vLLM's own scheduler (plugin bypassed). Per-request speed measured:",
        f"{figures['speed']['solo_tps']:.0f} tokens/s alone, {figures['speed']['full_tps']:.0f} with {SLOTS} running.",
        "",
        "| trace | policy | SLO attainment | mean job latency (s) | P90 (s) | plugin us/step | vLLM schedule us/step |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in figures["rows"]:
        lines.append(
            f"| {row['trace']} | {row['policy']} | {row['slo_attainment']:.0%} | {row['mean_latency_s']:.2f} | "
            f"{row['p90_latency_s']:.2f} | {row['plugin_us_per_step']:.0f} | {row['vllm_schedule_us_per_step']:.0f} |"
        )
    lines += [
        "",
        f"Plugin overhead: {figures['plugin_us_per_step']:.0f} us per step with a policy active "
        f"({figures['bypass_us_per_step']:.0f} us bypassed), against {figures['vllm_schedule_us_per_step']:.0f} us "
        f"in vLLM's own schedule() and a {figures['model_step_ms']:.1f} ms model step.",
        f"Server start-up {figures['server_start_s']:.0f} s; whole run {figures['wall_s']:.0f} s.",
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
