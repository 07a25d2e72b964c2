import io
import json
import math

import numpy as np
from rich.console import Console

from slosched.core.records import InstanceStats
from slosched.metrics.plots import MAX_CDF_POINTS, cdf_points
from slosched.metrics.report import markdown_table, write_report
from slosched.metrics.summary import summarize
from slosched.metrics.table import (
    COLUMNS,
    TERMINAL_COLUMNS,
    best_rows,
    format_value,
    print_table,
    render_table,
)

from .factories import job, rejected, request, run

PNGS = ("job_latency_cdf.png", "slo_scale.png", "ttft_cdf.png", "slo_attainment.png")


def policy_run(policy: str, num_jobs: int, slowdown: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.5, 5.0, num_jobs)
    latency = base * (1 + rng.exponential(slowdown, num_jobs))
    arrivals = np.sort(rng.uniform(0, 100, num_jobs))
    jobs = [
        job(f"{policy}-{i}", arrival_s=a, latency_s=lat, no_contention_s=b, slo_s=3 * b)
        for i, (a, lat, b) in enumerate(zip(arrivals, latency, base, strict=True))
    ]
    jobs.append(rejected(f"{policy}-rejected", arrival_s=1.0))
    requests = [
        request(f"{policy}-q{i}", arrival_s=a, ttft_s=0.1 * slowdown + 0.01 * (i % 7)) for i, a in enumerate(arrivals)
    ]
    instances = [InstanceStats("gpu0", num_steps=100, busy_s=50.0, prefix_query_tokens=10, prefix_hit_tokens=5)]
    return run(jobs, requests, instances, policy=policy)


def test_report_writes_markdown_json_and_figures(tmp_path):
    results = {"fcfs": policy_run("fcfs", 50, 2.0), "urgency|v2": policy_run("urgency", 50, 0.5)}
    path = write_report(tmp_path / "out", results, title="Demo", scenario_description="Two policies.")
    assert path == tmp_path / "out" / "report.md"
    text = path.read_text()
    assert text.startswith("# Demo\n\nTwo policies.")
    assert "| fcfs |" in text and "| urgency\\|v2 |" in text
    assert "### fcfs" in text and "| gpu0 | 100 | 50.0% | 50.0% |" in text
    for png in PNGS:
        assert f"]({png})" in text
        assert (tmp_path / "out" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    payload = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert set(payload) == set(results) and payload["fcfs"]["jobs"] == 51


def test_report_survives_empty_and_all_rejected_runs(tmp_path):
    results = {"empty": run(policy="empty"), "rejecting": run([rejected("a")], policy="rejecting")}
    text = write_report(tmp_path, results, title="Edge", scenario_description="").read_text()
    assert "| empty |" in text and "| rejecting |" in text and "(no instance statistics)" in text
    assert all((tmp_path / png).exists() for png in PNGS)


def test_report_of_four_policies_of_5k_jobs_is_complete(tmp_path):
    # Its speed is not asserted here (a timed test fails on a loaded machine); cdf_points' thinning, tested
    # below, is what keeps large runs cheap to plot.
    results = {f"p{k}": policy_run(f"p{k}", 5000, 0.5 + k, seed=k) for k in range(4)}
    write_report(tmp_path, results, title="Speed", scenario_description="")
    assert all((tmp_path / png).exists() for png in PNGS)
    assert all(f"p{k}" in (tmp_path / "report.md").read_text() for k in range(4))


def test_cdf_points_thin_large_samples_but_keep_the_ends():
    values = np.concatenate([np.arange(10_000.0), [np.nan, np.inf]])
    xs, ys = cdf_points(values)
    assert xs.size <= MAX_CDF_POINTS
    assert (xs[0], xs[-1], ys[-1]) == (0.0, 9999.0, 1.0)
    assert np.all(np.diff(xs) > 0)


def test_best_rows_marks_ties_ignores_nan_and_needs_two_candidates():
    assert best_rows([0.5, 0.9, 0.9, math.nan], higher_is_better=True) == {1, 2}
    assert best_rows([3.0, math.inf, 1.0], higher_is_better=False) == {2}
    assert best_rows([1.0, math.nan], higher_is_better=False) == set()
    assert best_rows([1.0, 2.0], higher_is_better=None) == set()
    assert best_rows([0.0, 0.0, 0.0], higher_is_better=False) == set()  # all tied: nothing stands out


def test_format_value():
    assert format_value(math.nan, ".3g") == "-"
    assert format_value(math.inf, ".3g") == "inf"
    assert format_value(0.953, ".1f", percent=True) == "95.3%"
    assert format_value(7, "d") == "7"


def test_rich_table_has_one_row_per_policy_and_highlights_the_best():
    summaries = {"good": summarize(policy_run("good", 20, 0.1)), "bad": summarize(policy_run("bad", 20, 5.0))}
    table = render_table(summaries, title="cmp", columns=COLUMNS)
    assert table.row_count == 2 and len(table.columns) == len(COLUMNS) + 1
    attainment_index = 1 + next(i for i, c in enumerate(COLUMNS) if c.header == "SLO att.")
    cells = list(table.columns[attainment_index].cells)
    assert "green" in str(cells[0].style) and not str(cells[1].style)
    out = io.StringIO()
    print_table(summaries, console=Console(file=out, width=250))
    assert "good" in out.getvalue() and "bad" in out.getvalue()
    assert len(render_table(summaries).columns) == len(TERMINAL_COLUMNS) + 1  # the terminal's subset


def test_markdown_table_shape():
    lines = markdown_table(["a", "b"], [["x", "1"]])
    assert lines == ["| a | b |", "|---|---:|", "| x | 1 |"]
