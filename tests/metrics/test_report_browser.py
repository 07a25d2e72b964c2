"""report.html in headless Chromium: every plot renders, offline, with no console message at all.

Skipped when Chromium is absent, unless ``SLOSCHED_REQUIRE_BROWSER=1`` (then it fails).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from slosched.metrics.report import write_report

from .chromium import chromium_or_skip, render, screenshot
from .test_html_report import FIGURES, SERIES, mixed_run


class _Plots(HTMLParser):
    """Figure ids (``fig-*``) that plotly turned into a plot, and the number of plotly SVG layers."""

    def __init__(self) -> None:
        super().__init__()
        self.rendered: set[str] = set()
        self.svgs = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        classes = (values.get("class") or "").split()
        if (values.get("id") or "").startswith("fig-") and "js-plotly-plot" in classes:
            self.rendered.add(str(values["id"])[4:])
        if tag == "svg" and "main-svg" in classes:
            self.svgs += 1


def test_report_renders_every_plot_without_console_errors(tmp_path):
    binary = chromium_or_skip()
    results = {"fcfs": mixed_run("fcfs", 5.0), "edf": mixed_run("edf", 0.0)}
    write_report(tmp_path, results, title="Browser", scenario_description="")
    page = render(binary, tmp_path / "report.html")
    assert page.console == []
    plots = _Plots()
    plots.feed(page.dom)
    assert plots.rendered == set(FIGURES + SERIES)
    assert plots.svgs >= 2 * len(plots.rendered)  # plotly draws each plot in two SVG layers
    legend = set(re.findall(r'class="legendtext"[^>]*>([^<]+)<', page.dom))
    # Policies (toggle in every subplot); one instance per run, so the series are one line per policy too.
    assert {"fcfs", "edf"} <= legend and "gpu0" not in legend


def test_console_errors_are_detected(tmp_path):
    # The check above must be able to fail: a page that throws shows up in the console list.
    binary = chromium_or_skip()
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>throw new Error('broken report')</script></body></html>")
    assert any("broken report" in line for line in render(binary, bad).console)


def test_screenshot_is_a_nonblank_png(tmp_path):
    binary = chromium_or_skip()
    write_report(tmp_path, {"fcfs": mixed_run("fcfs", 5.0)}, title="Shot", scenario_description="")
    out = tmp_path / "shot.png"
    shot = screenshot(binary, tmp_path / "report.html", out, height=900)
    assert shot.console == []
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a blank page compresses to a few kB
