"""Hardware as data: the new bundled GPUs, user files merged over the bundled ones (validated, naming the
field), the $SLOSCHED_HARDWARE / --hardware routes, and new GPUs usable in a simulation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from slosched.cli.main import run
from slosched.core.errors import ConfigError, UnknownNameError
from slosched.perf.hardware import HARDWARE_ENV, gpu_facts, gpu_names, load_hardware, model_facts, use_hardware
from slosched.perf.roofline import CALIBRATION, RooflineModel, gpu_efficiency
from tests.scenario.test_config import BASE

USER = {
    "gpus": {
        "H300": {
            "memory_gb": 288,
            "memory_bandwidth_gbps": 8000,
            "bf16_tflops": 2500,
            "interconnect_gbps": 900,
            "price_per_hour": 6.5,
        },
        "H100": {"price_per_hour": 2.1},
    },
    "models": {
        "Tiny-1B": {
            "params_b": 1.24,
            "layers": 16,
            "hidden_size": 2048,
            "head_dim": 64,
            "kv_heads": 8,
            "intermediate_size": 8192,
            "vocab_size": 128256,
        }
    },
}


def _file(tmp_path: Path, data: object, name: str = "hw.yaml") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data))
    return path


@pytest.fixture(autouse=True)
def _no_user_hardware(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HARDWARE_ENV, "")  # restored after each test, also when use_hardware changed it


def test_new_bundled_gpus_match_their_datasheets() -> None:
    expected = {
        "H200": (141e9, 4.8e12, 989e12),
        "B200": (180e9, 8.0e12, 2250e12),
        "L4": (24e9, 300e9, 121e12),
        "MI300X": (192e9, 5.3e12, 1307.4e12),
    }
    for name, (memory, bandwidth, flops) in expected.items():
        facts = gpu_facts(name)
        assert (facts.memory_bytes, facts.bandwidth_Bps, facts.fp16_flops) == (memory, bandwidth, flops)
        assert facts.efficiency_like in CALIBRATION.gpus and name not in CALIBRATION.gpus
    assert all(gpu_facts(name).price_per_hour is not None for name in gpu_names())
    prices = [gpu_facts(name).price_per_hour or 0.0 for name in ("B200", "H200", "L4")]
    assert prices == sorted(prices, reverse=True) and prices[-1] > 0


def test_borrowed_efficiencies_and_links() -> None:
    h200 = gpu_efficiency(gpu_facts("H200"))
    assert (h200.compute, h200.memory) == (CALIBRATION.gpus["H100"].compute, CALIBRATION.gpus["H100"].memory)
    assert h200.link_Bps == pytest.approx(360e9)  # 0.8 x 450 GB/s, as the calibrated H100 link
    assert gpu_efficiency(gpu_facts("L4")).link_latency_s > h200.link_latency_s  # PCIe, not NVLink
    assert gpu_efficiency(gpu_facts("H100")) is CALIBRATION.gpus["H100"]


def test_faster_memory_decodes_faster() -> None:
    shape = (0, 0, 32, 32 * 1000)
    times = {gpu: RooflineModel.build(gpu, "Llama-3-8B").step_time_s(*shape) for gpu in ("H100", "H200", "B200")}
    assert times["B200"] < times["H200"] < times["H100"]
    assert RooflineModel.build("MI300X", "Llama-3.1-70B", tp=2).num_kv_blocks() > 0


def test_user_file_merges_over_the_bundled_data(tmp_path: Path) -> None:
    catalog = load_hardware([_file(tmp_path, USER)])
    h300 = catalog.gpu("H300")
    assert (h300.memory_bytes, h300.bandwidth_Bps, h300.fp16_flops) == (288e9, 8000e9, 2500e12)
    assert h300.interconnect_Bps == 900e9 and h300.price_per_hour == 6.5
    assert catalog.gpu("H100").price_per_hour == 2.1 and catalog.gpu("H100").memory_bytes == 80e9
    tiny = catalog.model("Tiny-1B")
    assert (tiny.heads, tiny.head_dim, tiny.kv_dim) == (32, 64, 512)
    assert gpu_facts("H100").price_per_hour != 2.1  # loading a file does not make it active
    later = _file(tmp_path, {"gpus": {"H300": {"price_per_hour": 7.0}}}, "later.json")
    assert load_hardware([_file(tmp_path, USER), later]).gpu("H300").price_per_hour == 7.0


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"gpus": {"X1": {"memory_gb": 80}}}, "gpus.X1.memory_bandwidth_gbps", "required for a new entry"),
        ({"gpus": {"H100": {"memory_gb": -1}}}, "gpus.H100.memory_gb", "greater than 0"),
        ({"gpus": {"H100": {"memory": 80}}}, "gpus.H100.memory", "allowed: memory_gb"),
        ({"gpus": {"H100": {"price_per_hour": "cheap"}}}, "gpus.H100.price_per_hour", "valid number"),
        ({"gpus": {"H100": {"efficiency_like": "TPU"}}}, "gpus.H100.efficiency_like", "known names"),
        ({"gpu": {}}, "gpu", "allowed: gpus, models"),
        ({"models": {"M": {**USER["models"]["Tiny-1B"], "kv_heads": 7}}}, "models.M.kv_heads", "divide"),
        ({"models": {"M": {"layers": 2}}}, "models.M.params_b", "required"),
    ],
)
def test_validation_names_the_field(tmp_path: Path, data: object, field: str, message: str) -> None:
    path = _file(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_hardware([path])
    assert info.value.field.endswith(field), info.value.field
    assert message in str(info.value)


def test_unreadable_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpus: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_hardware([bad])
    with pytest.raises(ConfigError, match="cannot read"):
        load_hardware([tmp_path / "absent.yaml"])


def test_env_route_and_use_hardware(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UnknownNameError):
        gpu_facts("H300")
    path = _file(tmp_path, USER)
    monkeypatch.setenv(HARDWARE_ENV, str(path))
    assert gpu_facts("H300").memory_bytes == 288e9 and model_facts("Tiny-1B").layers == 16
    assert RooflineModel.build("H300", "Tiny-1B").step_time_s(0, 0, 8, 8000) > 0
    monkeypatch.setenv(HARDWARE_ENV, "")
    catalog = use_hardware([path])
    assert "H300" in catalog.gpus and "H300" in gpu_names()
    monkeypatch.setenv(HARDWARE_ENV, str(tmp_path / "gone.yaml"))
    with pytest.raises(ConfigError, match="does not exist"):
        gpu_facts("H100")


def _simulate(tmp_path: Path, gpu: str, model: str, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    instances = [{"name": "a", "gpu": gpu, "model": model, "count": 1}]
    data = {**BASE, "cluster": {"instances": instances}, "policies": ["least-loaded+chunked-fcfs"]}
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(data))
    trace = tmp_path / "jobs.jsonl"
    assert run(["trace", str(scenario), "--out", str(trace), *extra]) == 0
    assert run(["simulate", str(scenario), "--trace", str(trace), "--json"]) == 0
    summary: dict = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["policies"]
    return summary["least-loaded+chunked-fcfs"]


def test_a_tiny_simulation_on_h200(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = _simulate(tmp_path, "H200", "Llama-3-8B", capsys)
    assert summary["jobs"] == 20 and summary["rejected"] == 0


def test_a_user_gpu_via_the_hardware_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path, USER)
    summary = _simulate(tmp_path, "H300", "Tiny-1B", capsys, "--hardware", str(path))
    assert summary["jobs"] == 20
    assert run(["hardware", "--hardware", str(path)]) == 0
    assert "gpu H300: 288 GB" in capsys.readouterr().out


def test_a_scenario_names_its_hardware_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _file(tmp_path, USER, "gpus.yaml")
    instances = [{"name": "a", "gpu": "H300", "model": "Tiny-1B", "count": 1}]
    data = {**BASE, "hardware": "gpus.yaml", "cluster": {"instances": instances}, "policies": ["least-loaded+fcfs"]}
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(data))  # the file is found beside the scenario, from any directory
    assert run(["simulate", str(scenario), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["policies"]
    assert summary["least-loaded+fcfs"]["jobs"] == 20


def test_a_scenario_hardware_problem_names_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    instances = [{"name": "a", "gpu": "H300", "model": "Tiny-1B", "count": 1}]
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({**BASE, "hardware": ["absent.yaml"], "cluster": {"instances": instances}}))
    assert run(["simulate", str(scenario)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert any(line.startswith("error: hardware:") and "absent.yaml" in line for line in errors), errors
