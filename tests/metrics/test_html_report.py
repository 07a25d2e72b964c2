"""report.html: self-contained, every plot present, breakdowns and series shown, styles distinct."""

from __future__ import annotations

import base64
import gzip
import itertools
import re

import numpy as np
import pytest
from matplotlib.figure import Figure
from plotly.offline import get_plotlyjs

from slosched.core.records import InstanceSeries, RunResult
from slosched.metrics import plots
from slosched.metrics.groups import group_stats
from slosched.metrics.html_figures import attainment_figure, miss_share, slo_scale_figure
from slosched.metrics.report import write_report
from slosched.metrics.styles import policy_styles
from slosched.metrics.summary import summarize

from .factories import job, rejected, request, run

FIGURES = ("attainment", "slo-scale", "cdf-latency", "cdf-ttft", "cdf-tpot", "by-template", "by-tenant")
SERIES = ("series-waiting", "series-running", "series-kv", "series-util")


def mixed_run(policy: str, slow: float) -> RunResult:
    """Two templates x two tenants; ``slow`` stretches the latency of tenant b's jobs past their SLO."""
    jobs, requests = [], []
    for i in range(40):
        template, tenant = ("chat", "a") if i % 2 else ("code", "b")
        latency = 1.0 + (slow if tenant == "b" and i % 4 == 0 else 0.0)
        jobs.append(job(f"j{i}", arrival_s=i * 0.5, latency_s=latency, slo_s=2.0, template=template, tenant=tenant))
        requests.append(request(f"j{i}", arrival_s=i * 0.5, ttft_s=0.05 + 0.01 * (i % 5)))
    jobs.append(rejected("r", arrival_s=3.0))
    result = run(jobs, requests, policy=policy)
    series = InstanceSeries("gpu0", num_kv_blocks=100, interval_s=1.0)
    for k in range(21):
        series.times_s.append(float(k))
        series.num_waiting.append(k % 3)
        series.num_running.append(k % 5)
        series.kv_used_blocks.append(5 * k % 100)
        series.busy_s.append(0.5 * k)
    result.series = [series]
    return result


def test_html_report_is_self_contained_and_has_every_plot(tmp_path):
    results = {"fcfs": mixed_run("fcfs", 5.0), "edf<x>": mixed_run("edf", 0.0)}
    write_report(tmp_path, results, title="Mixed <b>", scenario_description="two templates & tenants")
    text = (tmp_path / "report.html").read_text()
    assert (
        "<title>Mixed &lt;b&gt;</title>" in text and "edf&lt;x&gt;" in text and "edf<x>" not in text.split("<script")[0]
    )
    assert not re.search(r"<script[^>]+src=", text), "plotly.js must be inlined, not fetched"
    packed = re.search(r'<script type="application/octet-stream" id="plotly-js">([^<]+)</script>', text)
    assert packed and gzip.decompress(base64.b64decode(packed.group(1))).decode() == get_plotlyjs()
    assert text.count('id="plotly-js"') == 1 and len(packed.group(1)) < 0.45 * len(get_plotlyjs())  # once, packed
    for name in FIGURES + SERIES:
        assert f'id="fig-{name}"' in text, name
    assert 'id="load"' not in text  # one load: nothing to plot against load
    assert "](report.html)" in (tmp_path / "report.md").read_text()


def test_html_tables_show_per_template_and_per_tenant_attainment(tmp_path):
    results = {"fcfs": mixed_run("fcfs", 5.0)}
    write_report(tmp_path, results, title="t", scenario_description="")
    text = (tmp_path / "report.html").read_text()
    # Tenant b: 20 jobs + the rejected one (tenant default), 10 of b's stretched past the SLO.
    assert "<td>b</td><td>fcfs</td><td>20</td><td>50.0%</td>" in text
    assert "<td>a</td><td>fcfs</td><td>20</td><td>100.0%</td>" in text
    assert "<td>chat</td><td>fcfs</td><td>20</td><td>100.0%</td>" in text
    by_tenant = group_stats(results["fcfs"], "tenant")
    assert [s.group for s in by_tenant] == ["a", "b", "default"]
    assert sum(s.deadline_met for s in by_tenant) == summarize(results["fcfs"]).deadline_met
    assert sum(s.jobs for s in by_tenant) == 41


def test_load_plot_appears_with_several_loads_and_no_series_section_without_series(tmp_path):
    low, high = mixed_run("p", 0.0), mixed_run("p", 5.0)
    low.series, high.series = [], []
    write_report(tmp_path, {"p": high}, title="t", scenario_description="", by_load={1.0: {"p": low}, 2.0: {"p": high}})
    text = (tmp_path / "report.html").read_text()
    assert 'id="fig-load"' in text and 'id="load"' in text
    assert 'id="series"' not in text and 'id="fig-series-kv"' not in text


def test_empty_runs_still_write_a_page(tmp_path):
    write_report(tmp_path, {"empty": run(policy="empty")}, title="e", scenario_description="")
    text = (tmp_path / "report.html").read_text()
    assert 'id="fig-attainment"' in text and 'id="per-template"' not in text


def test_policy_styles_differ_in_colour_dash_and_marker():
    names = [f"p{k}" for k in range(12)]
    styles = policy_styles(names)
    assert len({s.colour for s in styles.values()}) == 12  # the demo's 11 policies differ by colour alone
    many = policy_styles([f"p{k}" for k in range(60)])
    assert len({(s.colour, s.plotly_dash, s.plotly_marker) for s in many.values()}) == 60
    assert len({(s.colour, s.mpl_dash, s.mpl_marker) for s in many.values()}) == 60
    for a, b in itertools.pairwise(names):
        assert (styles[a].colour, styles[a].plotly_dash) != (styles[b].colour, styles[b].plotly_dash)
        assert styles[a].width > styles[b].width  # earlier curves wider: an identical later one leaves a halo


def test_plotly_curves_of_identical_policies_stay_distinguishable():
    curve = np.linspace(0.5, 1.0, 5)
    styles = policy_styles(["a", "b"])
    figure = slo_scale_figure(np.geomspace(1, 10, 5), {"a": curve, "b": curve}, styles, (0.95,))
    lines = [(t.line.color, t.line.dash, t.line.width, t.marker.symbol) for t in figure.data]
    assert len(set(lines)) == 2 and all(t.legendgroup for t in figure.data)


def test_attainment_is_drawn_as_misses_on_a_log_axis(monkeypatch, tmp_path):
    assert miss_share(990, 1000) == (pytest.approx(0.01), "99.00% met (10 missed)")
    assert miss_share(10, 10)[0] == pytest.approx(0.05) and miss_share(0, 0)[1] == "n/a"
    figure = attainment_figure({"a": (900, 1000), "b": (999, 1000)}, policy_styles(["a", "b"]))
    assert figure.layout.xaxis.type == "log" and "0.01 (99%)" in figure.layout.xaxis.ticktext

    saved: list[Figure] = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: saved.append(fig) or path)
    plots.plot_attainment_bars({"a": (900, 1000), "b": (999, 1000)}, tmp_path / "x.png")
    axes = saved[0].axes[0]
    assert axes.get_xscale() == "log"
    widths = [bar.get_width() for bar in axes.patches]
    assert widths == pytest.approx([0.1, 0.001])  # a 0-1 axis would show these as equal


def test_png_curves_have_distinct_line_styles(monkeypatch, tmp_path):
    saved: list[Figure] = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: saved.append(fig) or path)
    values = np.linspace(1.0, 2.0, 50)
    plots.plot_cdfs({"a": values, "b": values, "c": values}, tmp_path / "x.png", title="t", xlabel="x")
    lines = saved[0].axes[0].get_lines()
    assert len({(line.get_color(), str(line.get_linestyle()), line.get_marker()) for line in lines}) == 3
    assert len({line.get_linewidth() for line in lines}) == 3


def test_report_files_are_byte_identical_for_the_same_input(tmp_path):
    results = {"a": mixed_run("a", 5.0), "b": mixed_run("b", 0.0)}
    write_report(tmp_path / "one", results, title="t", scenario_description="")
    write_report(tmp_path / "two", results, title="t", scenario_description="")
    for name in ("report.html", "report.md", "requests.parquet", "jobs.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
