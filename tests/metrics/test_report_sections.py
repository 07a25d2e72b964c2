"""report.html shows a section only where it says something; names cannot inject; the page stays small;
the PNGs and the HTML draw each policy in the same style."""

from __future__ import annotations

import re

import numpy as np
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from slosched.core.records import InstanceSeries
from slosched.metrics import plots
from slosched.metrics.html_figures import cdf_figure
from slosched.metrics.html_page import figure_block
from slosched.metrics.plots import cdf_points
from slosched.metrics.report import write_report
from slosched.metrics.styles import DASHES, MARKERS, policy_styles

from .factories import job, request, run
from .test_html_report import mixed_run


def _page(tmp_path, results, **kwargs) -> str:
    write_report(tmp_path, results, title=kwargs.pop("title", "t"), scenario_description="", **kwargs)
    return (tmp_path / "report.html").read_text()


def _plain_run(policy: str, tenants: int = 1, templates: int = 1):
    jobs = [
        job(f"j{i}", arrival_s=i, latency_s=1.0, slo_s=2.0, template=f"t{i % templates}", tenant=f"n{i % tenants}")
        for i in range(12)
    ]
    return run(jobs, [request(f"j{i}", arrival_s=i) for i in range(12)], policy=policy)


def test_per_tenant_section_only_with_two_tenants_or_more(tmp_path):
    assert 'id="per-tenant"' not in _page(tmp_path / "one", {"p": _plain_run("p", tenants=1)})
    assert 'id="per-tenant"' in _page(tmp_path / "two", {"p": _plain_run("p", tenants=2)})


def test_per_template_section_only_with_two_templates_or_more(tmp_path):
    assert 'id="per-template"' not in _page(tmp_path / "one", {"p": _plain_run("p", templates=1)})
    assert 'id="per-template"' in _page(tmp_path / "two", {"p": _plain_run("p", templates=2)})


def test_load_section_only_with_two_loads_or_more(tmp_path):
    single = _plain_run("p")
    assert 'id="load"' not in _page(tmp_path / "one", {"p": single}, by_load={1.0: {"p": single}})
    text = _page(tmp_path / "two", {"p": single}, by_load={1.0: {"p": single}, 2.0: {"p": _plain_run("p")}})
    assert 'id="load"' in text


def test_per_instance_view_only_with_two_instances_or_more(tmp_path):
    one = {"a": mixed_run("a", 0.0), "b": mixed_run("b", 1.0)}  # one instance (gpu0) each
    text = _page(tmp_path / "one", one)
    assert "Instances over time" not in text and "per instance" not in text
    assert '"name":"gpu0"' not in text and "one instance per policy" in text  # one line per policy instead
    two = {"a": mixed_run("a", 0.0)}
    second = InstanceSeries("gpu1", num_kv_blocks=100, interval_s=1.0)
    second.times_s += [0.0, 1.0]
    second.num_waiting += [0, 1]
    second.num_running += [1, 1]
    second.kv_used_blocks += [0, 5]
    second.busy_s += [0.0, 0.5]
    two["a"].series.append(second)
    text = _page(tmp_path / "two", two)
    assert "Instances over time" in text and '"name":"gpu1"' in text


def test_names_cannot_inject_markup(tmp_path):
    hostile = "<script>alert(1)</script>"
    results = {hostile: mixed_run("x", 0.0), "ok": mixed_run("ok", 1.0)}
    text = _page(tmp_path, results, title="<img src=x onerror=alert(2)>")
    assert "<img" not in text and "<script>alert" not in text and "</script>alert" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text  # shown in the table as text
    # Every <script> element is the page's own: the figure blocks, the template, plotly.js and the loader.
    assert text.count("<script") == text.count('class="figure-data"') + 3


def test_cdfs_are_thinned_to_a_few_hundred_points_with_a_dense_tail():
    values = np.random.default_rng(0).lognormal(size=20_000)
    xs, ys = cdf_points(values, 300)
    assert xs.size <= 300 and xs[-1] == values.max() and ys[-1] == 1.0
    assert (ys > 0.99).sum() >= 50  # the top 1% keeps a quarter of the points
    samples = {f"p{k}": values * (1 + k / 10) for k in range(12)}
    block = figure_block(cdf_figure(samples, policy_styles(list(samples)), "t", "x", 300), "cdf")
    assert len(block.json) < 120_000  # 12 curves of 20,000 samples; drawn raw they took ~600 kB


def test_png_and_html_draw_each_policy_alike(monkeypatch, tmp_path):
    names = [f"policy-{k}" for k in range(13)]
    styles = policy_styles(names)
    saved: list[Figure] = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: saved.append(fig) or path)
    values = {name: np.linspace(1.0, 2.0, 20) + k for k, name in enumerate(names)}
    plots.plot_cdfs(values, tmp_path / "x.png", title="t", xlabel="x")
    png = {line.get_label().split(" (n=")[0]: line for line in saved[0].axes[0].get_lines()}
    html = {trace.legendgroup: trace for trace in cdf_figure(values, styles, "t", "x").data}
    mpl_dash = dict(DASHES)
    mpl_marker = dict(MARKERS)
    for name in names:
        line, trace = png[name], html[name]
        assert to_hex(line.get_color()) == to_hex(trace.line.color)
        assert (
            trace.marker.symbol == styles[name].plotly_marker and line.get_marker() == mpl_marker[trace.marker.symbol]
        )
        assert mpl_dash[trace.line.dash] == styles[name].mpl_dash
    triples = {(to_hex(png[n].get_color()), html[n].line.dash, png[n].get_marker()) for n in names}
    assert len(triples) == len(names)


def test_report_html_stays_small(tmp_path):
    results = {f"p{k}": mixed_run(f"p{k}", 0.1 * k) for k in range(12)}
    text = _page(tmp_path, results)
    assert len(text.encode()) < 2_400_000  # ~2 MB is packed plotly.js; the demo's page is under 3 MB
    assert not re.search(r'"bdata":"[^"]{20000,}"', text)  # no raw per-request arrays
