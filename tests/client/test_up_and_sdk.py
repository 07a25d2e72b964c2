"""`slosched up` helpers (layers, config, PID-based stop) and the SDK against stub backends."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slosched.client.sdk import AsyncClient, Client, GatewayError, WorkflowRunner, slo_headers
from slosched.core.errors import ConfigError
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.devtools.up import VllmServer, gateway_config, parse_layers, stop_servers
from slosched.gateway.ops.config import parse_config
from tests.gateway.helpers import background_gateway


def test_parse_layers_cycles_and_rejects_bad_values() -> None:
    assert parse_layers("2,8", 3) == [2, 8, 2]
    for bad in ("", "a", "0", "2,65"):
        with pytest.raises(ConfigError, match="--layers"):
            parse_layers(bad, 2)


def test_stop_servers_kills_the_whole_process_group_by_pid(tmp_path: Path) -> None:
    # A parent that spawns a child in the same (new) group, like vLLM's API server and its engine core.
    child = "import time; time.sleep(60)"
    script = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(60)"
    process = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    time.sleep(0.5)
    children = subprocess.run(["pgrep", "-g", str(process.pid)], capture_output=True, text=True).stdout.split()
    assert len(children) == 2
    server = VllmServer("s", 1, 2, process, tmp_path / "log", 0)
    stop_servers([server], grace_s=5)
    assert process.poll() is not None
    assert not _alive_in_group(process.pid)
    config = parse_config(gateway_config([server], port=9000))
    assert config.backends[0].url == "http://127.0.0.1:1" and config.backends[0].forward_priority


def _alive_in_group(pgid: int) -> list[str]:
    """Members of the process group that are not zombies (an orphan's zombie waits for init to reap it)."""
    for _ in range(50):
        members = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout.split()
        states = [
            subprocess.run(["ps", "-o", "stat=", "-p", pid], capture_output=True, text=True).stdout for pid in members
        ]
        alive = [pid for pid, state in zip(members, states, strict=True) if state.strip() and not state.startswith("Z")]
        if not alive:
            return []
        time.sleep(0.1)
    return alive


@pytest.fixture(scope="module")
def gateway_url() -> Iterator[str]:
    with background_gateway(trust_tenant_header=True) as url:  # the calls name their tenant in x-tenant
        yield url


def test_sync_client_calls_stream_jobs_and_relquery(gateway_url: str) -> None:
    with Client(gateway_url) as client:
        answer = client.completions("hi", max_tokens=3, headers=slo_headers(deadline_ms=5000, tenant="a"))
        assert answer["usage"]["completion_tokens"] == 3
        assert client.chat([{"role": "user", "content": "x"}], max_tokens=2)["choices"][0]["message"]["content"]
        events = list(client.stream("/v1/completions", {"prompt": "p", "max_tokens": 4}))
        assert len(events) == 4
        job = client.create_job("workflow", slo_s=10, template="t")
        stage = client.run_stage(job["id"], "s", [{"prompt": "a", "max_tokens": 2}], final=True)
        assert stage["job"]["status"] == "completed"
        done = client.relquery("Q {a}", [{"a": 1}, {"a": 2}], slo_s=10, params={"max_tokens": 2})
        assert done["status"] == "completed" and len(done["stages"][0]["results"]) == 2
        sorted_rows = client.relquery("Q {a}", [{"a": 2}, {"a": 1}], slo_s=10, params={"max_tokens": 2}, order="rows")
        assert sorted_rows["status"] == "completed" and len(sorted_rows["stages"][0]["results"]) == 2
        with pytest.raises(GatewayError) as error:
            client.completions("p", max_tokens=0)
        assert error.value.status == 400


def test_async_runner_replays_dag_and_direct_mode(gateway_url: str) -> None:
    job = JobSpec(
        id="w",
        kind=JobKind.WORKFLOW,
        arrival_s=0.0,
        slo_s=30.0,
        template="t",
        stages=(
            StageSpec("a", (CallSpec(10, 3),)),
            StageSpec("b", (CallSpec(12, 2),), after=("a",)),
            StageSpec("c", (CallSpec(8, 4), CallSpec(9, 5)), after=("a",)),
        ),
    )

    async def scenario() -> None:
        async with AsyncClient(gateway_url) as client:
            via_jobs = await WorkflowRunner(client).replay([job])
            direct = await WorkflowRunner(client, direct=True).replay([job])
            state = await client.job(via_jobs[0].job_id)
        assert via_jobs[0].status == "completed" and via_jobs[0].slo_met
        assert direct[0].status == "completed" and direct[0].job_id == ""
        assert sorted(stage["name"] for stage in state["stages"]) == ["a", "b", "c"]
        assert [r["output_tokens"] for r in state["stages"][0]["results"]] == [3]

    asyncio.run(scenario())
