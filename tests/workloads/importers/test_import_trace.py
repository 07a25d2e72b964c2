"""What every format shares: the registry, --limit, --rate-scale, argument errors, and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from slosched.cli.main import run
from slosched.core.errors import ConfigError, UnknownNameError
from slosched.workloads.importers import IMPORTERS, format_names, import_trace
from slosched.workloads.trace_io import load_jobs
from tests.workloads.importers.helpers import SAMPLES

SAMPLE_OF = {
    "azure": "azure_2023.csv",
    "azure2024": "azure_2024.csv",
    "burstgpt": "burstgpt.csv",
    "mooncake": "mooncake.jsonl",
    "sharegpt": "sharegpt.json",
    "vidur": "vidur.csv",
}


def test_every_format_is_registered_with_a_sample() -> None:
    assert format_names() == sorted(SAMPLE_OF)
    assert all(IMPORTERS[name].name == name and IMPORTERS[name].summary for name in IMPORTERS)


@pytest.mark.parametrize("fmt", sorted(SAMPLE_OF))
def test_limit_and_rate_scale(fmt: str) -> None:
    full = import_trace(fmt, SAMPLES / SAMPLE_OF[fmt]).jobs
    limited = import_trace(fmt, SAMPLES / SAMPLE_OF[fmt], limit=4)
    assert limited.rows_read == 4 and len(limited.jobs) <= 4
    faster = import_trace(fmt, SAMPLES / SAMPLE_OF[fmt], rate_scale=2.0).jobs
    assert [job.arrival_s for job in faster] == pytest.approx([job.arrival_s / 2 for job in full])
    assert [job.stages for job in faster] == [job.stages for job in full]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"fmt": "csv"}, "--format"), ({"limit": 0}, "--limit"), ({"rate_scale": 0.0}, "--rate-scale")],
)
def test_bad_arguments(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"fmt": "vidur", "path": SAMPLES / "vidur.csv", **kwargs}
    with pytest.raises(ConfigError) as info:
        import_trace(**args)  # type: ignore[arg-type]
    assert info.value.field == field
    if field == "--format":
        assert isinstance(info.value, UnknownNameError) and "mooncake" in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        import_trace("vidur", tmp_path / "absent.csv")


def test_cli_import_writes_a_replayable_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "jobs.jsonl"
    args = ["trace", "import", str(SAMPLES / "burstgpt.csv"), "--format", "burstgpt", "--out", str(out)]
    assert run([*args, "--limit", "9", "--rate-scale", "2"]) == 0
    jobs = load_jobs(out)
    assert len(jobs) == 8  # 9 rows read, the eighth a failed request
    assert "wrote 8 jobs" in capsys.readouterr().out


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("arrived_at,num_prefill_tokens\n1,2\n")
    code = run(["trace", "import", str(bad), "--format", "vidur", "--out", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"{bad} line 1, column num_decode_tokens: missing column" in " ".join(err.split())
