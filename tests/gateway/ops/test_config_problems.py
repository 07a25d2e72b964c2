"""The gateway config is validated like scenarios: every problem at once, each with the field as the file
spells it and a did-you-mean, no pydantic prefix; `slosched serve` binds its port before it announces it."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from slosched.cli.main import run
from slosched.core.problems import ConfigProblems
from slosched.gateway.http.server import serve_gateway
from slosched.gateway.ops.config import parse_config

_BACKEND = {"name": "a", "url": "http://127.0.0.1:9"}


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigProblems) as caught:
        parse_config(data)
    assert "Value error" not in str(caught.value)
    return [f"{p.field}: {p.message}" for p in caught.value.problems]


def test_every_mistake_is_reported_at_once_with_its_path_and_a_suggestion() -> None:
    lines = _problems(
        {
            "backends": [{**_BACKEND, "max_concurency": 3}, {"name": "b", "url": "ftp://x"}],
            "policies": {"router": "least-token", "job": "deadlin"},
            "timeouts": {"queue_s": -1},
        }
    )
    assert len(lines) == 5, lines
    assert lines[0].startswith(
        "backends.0.max_concurency: unknown key 'max_concurency' (did you mean 'max_concurrency'?)"
    )
    assert lines[1].startswith("backends.1.url: ") and "'ftp://x'" in lines[1]
    assert any(
        line.startswith("policies.router: unknown router 'least-token' (did you mean 'least-tokens'?)")
        for line in lines
    )
    assert any(
        line.startswith("policies.job: unknown job policy 'deadlin' (did you mean 'deadline'?)") for line in lines
    )
    assert lines[-1].startswith("timeouts.queue_s: Input should be greater than 0")


def test_pipeline_mistakes_all_in_one_run() -> None:
    pipeline = {
        "filters": ["kv-fit", "nope"],
        "scorers": [{"name": "least-token", "weight": 1}, {"name": "least-loaded", "wieght": 2, "params": {"x": 1}}],
        "picker": "maxx",
    }
    lines = _problems({"backends": [_BACKEND], "policies": {"router": "pipeline", "router_params": pipeline}})
    field = "policies.router_params"
    assert [line.split(":")[0] for line in lines] == [
        f"{field}.filters[0].name",
        f"{field}.filters[1].name",
        f"{field}.scorers[0].name",
        f"{field}.scorers[1].wieght",
        f"{field}.scorers[1].params.x",
        f"{field}.picker.name",
    ]
    assert "(did you mean 'kv-fits'?)" in lines[0] and "(did you mean 'least-tokens'?)" in lines[2]
    assert "(did you mean 'weight'?)" in lines[3] and "(did you mean 'max'?)" in lines[5]


def test_serve_names_a_busy_port_in_one_error_line_and_announces_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump({"backends": [_BACKEND]}))
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        assert run(["serve", str(path), "--host", "127.0.0.1", "--port", str(port)]) == 2
    captured = capsys.readouterr()
    lines = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: 127.0.0.1:{port}: cannot listen"), lines
    assert "http://" not in captured.err and "Traceback" not in captured.err


class _Stop(Exception):
    pass


def test_the_url_is_announced_once_the_port_is_bound() -> None:
    announced: list[str] = []

    def announce(url: str) -> None:
        announced.append(url)
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=2):  # already listening
            pass
        raise _Stop

    with pytest.raises(_Stop):
        serve_gateway(parse_config({"backends": [_BACKEND]}), "127.0.0.1", 0, announce=announce)
    assert announced and announced[0].startswith("http://127.0.0.1:") and not announced[0].endswith(":0")
