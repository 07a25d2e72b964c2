"""Issue 25: a benchmark row whose jobs were all refused, or that reached no server, fails loudly (an
``error:`` line and a non-zero exit) instead of being scored 0 as if it were a result."""

from __future__ import annotations

import pytest

from slosched.bench import registry
from slosched.bench.base import Benchmark, BenchmarkFailed, check_row
from slosched.cli.main import run as cli


def test_check_row_refuses_wholesale_rejection_and_rows_no_server_saw() -> None:
    with pytest.raises(BenchmarkFailed, match="all 3 jobs were rejected"):
        check_row("live gw", ["rejected:403"] * 3, [0.0, 0.0])
    with pytest.raises(BenchmarkFailed, match="no request reached the servers"):
        check_row("live gw", ["completed", "failed"], [0.0, 0.0])
    check_row("live gw", ["completed", "rejected:429"], [4.0, 0.0])  # measured: some refusals are a result


def test_the_cli_prints_one_error_line_and_exits_non_zero(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(quick: bool) -> dict[str, object]:
        check_row("fake row", ["rejected:403"] * 2)
        return {}

    monkeypatch.setattr(registry, "get_benchmark", lambda name: Benchmark(name, "fake", run))
    assert cli(["bench", "fake", "--quick", "--json"]) != 0
    err = capsys.readouterr().err
    assert "error:" in err and "fake row: all 2 jobs were rejected" in err and "Traceback" not in err
