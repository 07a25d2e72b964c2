"""The plugin engine over a fake scheduler: ordering applied and undone, control file, state export."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from slosched.core.errors import ConfigError
from slosched.policies.engine.nexus_state import EngineState
from slosched.vllm_ext.config import config_from_env, config_from_mapping
from slosched.vllm_ext.control import write_control
from slosched.vllm_ext.engine import SloschedEngine
from slosched.vllm_ext.state_export import read_state
from slosched.vllm_ext.version import UnsupportedVllmVersionError, check_vllm_version
from tests.vllm_ext.fakes import FakeRequest, FakeScheduler


def _output(scheduled: dict[str, int]) -> SimpleNamespace:
    return SimpleNamespace(num_scheduled_tokens=scheduled, scheduled_new_reqs=[], total_num_scheduled_tokens=0)


def _engine(sched: FakeScheduler, **config: object) -> SloschedEngine:
    return SloschedEngine(sched, config=config_from_mapping(config))


def test_priority_ordering_is_applied_for_the_call_and_gated_requests_restored() -> None:
    sched = FakeScheduler()
    for name, priority in (("a", 3), ("b", 1), ("c", 2)):
        sched.add(FakeRequest(name, xargs={"slosched_priority": priority}))
    engine = _engine(sched, ordering="static-priority", admission="static-concurrency", admission_params={"cap": 2})
    context = engine.before_schedule(sched)
    assert [raw.request_id for raw in sched.waiting] == ["b", "c"]  # lowest priority first, cap 2
    engine.undo(sched, context)
    assert [raw.request_id for raw in sched.waiting] == ["b", "c", "a"]
    assert (sched.max_num_scheduled_tokens, sched.max_num_active_reqs) == (256, 8)


def test_decode_only_drain_hides_waiting_and_prefill_chunks_then_restores() -> None:
    sched = FakeScheduler()
    first = sched.add(FakeRequest("d1", 50, 60), running=True)
    chunk = sched.add(FakeRequest("c1", 400, 128, chunk=True), running=True)
    last = sched.add(FakeRequest("d2", 50, 60), running=True)
    sched.add(FakeRequest("w1"))
    engine = _engine(sched, drain=True)
    context = engine.before_schedule(sched)
    assert list(sched.waiting) == [] and sched.running == [first, chunk, last]  # drain: admit nothing only
    engine.undo(sched, context)
    assert [raw.request_id for raw in sched.waiting] == ["w1"]
    engine = _engine(sched, batching="prefill-first")
    context = engine.before_schedule(sched)
    assert sched.running == [chunk]  # prefill-first: decodes sit out while a prefill exists
    sched.running.append(sched.waiting.popleft())  # the base call admits w1
    engine.undo(sched, context)
    assert [raw.request_id for raw in sched.running] == ["d1", "c1", "d2", "w1"]


def test_control_file_switches_policy_and_reports_errors(tmp_path: Path) -> None:
    control = tmp_path / "control.json"
    sched = FakeScheduler()
    engine = _engine(sched, control_file=str(control), control_poll_s=0.001)
    assert engine.policy.name == "fcfs/always/chunked"
    write_control(control, {"preset": "urgency", "version": 3})
    time.sleep(0.01)
    engine.undo(sched, engine.before_schedule(sched))
    assert engine.policy.name == "urgency" and engine.control_version == 3 and not engine.control_error
    write_control(control, {"preset": "no-such-policy", "version": 4})
    time.sleep(0.01)
    engine.undo(sched, engine.before_schedule(sched))
    assert engine.policy.name == "urgency" and "no-such-policy" in engine.control_error
    control.unlink()
    time.sleep(0.01)
    engine.undo(sched, engine.before_schedule(sched))
    assert engine.policy.name == "fcfs/always/chunked"  # file removed: back to the start-up config


def test_state_export_is_readable_by_prism_with_its_age(tmp_path: Path) -> None:
    state_file = tmp_path / "state.json"
    sched = FakeScheduler()
    sched.add(FakeRequest("w1", 300, xargs={"slosched_predicted_tokens": 20, "slosched_budget_s": "x"}))
    engine = _engine(sched, state_file=str(state_file), export_interval_s=0.05)
    context = engine.before_schedule(sched)
    engine.undo(sched, context)
    engine.after_schedule(sched, context, _output({}), 0.0, 0.0)
    engine.close()
    state = read_state(state_file)
    assert state is not None and 0 <= state["age_s"] < 5
    parsed = EngineState.from_mapping(state)
    assert parsed.pending_prefill_tokens == 300 and parsed.pending_requests == 1
    assert parsed.free_kv_tokens == 100 * 16 - 320  # free KV minus prompt + predicted output
    assert state["plugin"]["metadata_problems"] == {"slosched_budget_s": 1}
    assert state["step_model"]["num_observations"] == 0


def test_config_errors_name_the_field_and_env_precedence() -> None:
    with pytest.raises(ConfigError, match="unknown keys"):
        config_from_mapping({"polcy": "x"})
    with pytest.raises(ConfigError, match="export_interval_s"):
        config_from_mapping({"export_interval_s": -1})
    env = {"SLOSCHED_ENGINE_POLICY": "lens", "SLOSCHED_ENGINE_CONFIG": '{"drain": true}'}
    config = config_from_env({"preset": "urgency"}, env)
    assert config.policy.preset == "lens" and config.drain


def test_unsupported_vllm_version_message() -> None:
    check_vllm_version("0.32.0")
    with pytest.raises(UnsupportedVllmVersionError, match=r"supports vLLM 0\.32\.0, found 0\.10\.1"):
        check_vllm_version("0.10.1", override="")
    check_vllm_version("0.33.0", override="0.33.0")


def test_fair_share_configures_the_plugin_s_slots_by_tenant_weight(tmp_path: Path) -> None:
    """``fair_share`` in the plugin config: the engine's slots go by tenant weight (tenants from the request
    metadata) instead of first come, first served; a control file turns it off; errors name the field."""
    sched = FakeScheduler(max_active=4)
    for index in range(6):
        sched.add(FakeRequest(f"batch{index}", xargs={"slosched_tenant": "batch"}))
    for index in range(2):
        sched.add(FakeRequest(f"inter{index}", xargs={"slosched_tenant": "interactive"}))
    control = tmp_path / "control.json"
    fair = {"tenants": {"interactive": {"weight": 4}, "batch": {"weight": 1}}, "max_wait_s": 60}
    engine = _engine(sched, fair_share=fair, control_file=str(control), control_poll_s=0.001)
    assert engine.policy.fair_share is not None and engine.queue.fair is engine.policy.fair_share
    context = engine.before_schedule(sched)
    admitted = [raw.request_id for raw in sched.waiting]
    engine.undo(sched, context)
    assert sorted(admitted) == ["batch0", "inter0", "inter1"]  # batch holds its 1/5 of the 4 slots
    write_control(control, {"fair_share": None, "version": 1})
    time.sleep(0.01)
    before = list(sched.waiting)
    context = engine.before_schedule(sched)
    assert list(sched.waiting) == before  # fair sharing off: nothing held back, vLLM's own order decides
    engine.undo(sched, context)
    assert engine.policy.fair_share is None and not engine.control_error
    with pytest.raises(ConfigError, match=r"slosched engine config\.fair_share\.tenants\.batch\.weight"):
        config_from_mapping({"fair_share": {"tenants": {"batch": {"weight": 0}}}})
    with pytest.raises(ConfigError, match=r"slosched engine config\.fair_share: unknown \['weights'\]"):
        config_from_mapping({"fair_share": {"weights": {}}})


def test_bypass_with_a_step_timing_file_measures_every_completed_step(tmp_path: Path) -> None:
    timings = tmp_path / "timings.jsonl"
    sched = FakeScheduler()
    running = sched.add(FakeRequest("d1", 50, 60), running=True)
    engine = _engine(sched, bypass=True, step_timing_file=str(timings))
    context = engine.before_schedule(sched)
    assert context is None  # bypass: vLLM schedules as it would alone
    output = _output({running.request_id: 1})
    engine.after_schedule(sched, context, output, 0.0, 0.0)
    engine.after_update(sched, output, time.perf_counter())
    engine.close()
    (line,) = [json.loads(text) for text in timings.read_text().splitlines()]
    assert (line["decode_seqs"], line["prefill_tokens"], line["pending"]) == (1, 0, 1)
    assert line["decode_context"] == running.num_computed_tokens - 1 and line["model_s"] >= 0


def test_a_speed_probe_is_timed_between_steps_at_its_interval(tmp_path: Path) -> None:
    timings = tmp_path / "timings.jsonl"
    sched = FakeScheduler()
    running = sched.add(FakeRequest("d1", 50, 60), running=True)
    engine = _engine(sched, bypass=True, step_timing_file=str(timings), speed_probe_interval_s=3600.0)
    for _ in range(3):  # one probe after the first step, then none within the hour
        output = _output({running.request_id: 1})
        engine.after_schedule(sched, engine.before_schedule(sched), output, 0.0, 0.0)
        engine.after_update(sched, output, time.perf_counter())
    engine.close()
    lines = [json.loads(text) for text in timings.read_text().splitlines()]
    probes = [line for line in lines if "probe_s" in line]
    assert len(lines) == 4 and len(probes) == 1 and probes[0]["probe_s"] > 0
    assert lines.index(probes[0]) == 1 and probes[0]["done_s"] >= lines[0]["done_s"]
    with pytest.raises(ConfigError, match=r"config\.speed_probe_interval_s: expected a number >= 0"):
        config_from_mapping({"speed_probe_interval_s": -1})
    assert config_from_mapping({}).speed_probe_interval_s == 0.0  # off unless asked for
