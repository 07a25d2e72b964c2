"""report.html with 12 policies at 1,280 px in headless Chromium: tables fit, every legend is whole, no
policy or scenario name injects markup. Skipped without Chromium unless ``SLOSCHED_REQUIRE_BROWSER=1``."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from slosched.metrics.report import write_report

from .chromium import chromium_or_skip, render
from .test_html_report import mixed_run

_MEASURE = Path(__file__).parent / "data" / "measure_layout.js"
HOSTILE = "<script>alert('policy')</script>"
# Long composite names like the demo's ("predicted-latency+chunked-fcfs"), the hostile one among them.
POLICIES = [f"predicted-latency-{k}+chunked-fcfs" for k in range(11)] + [HOSTILE]


def twelve_policy_report(folder: Path) -> Path:
    results = {name: mixed_run(name, 0.5 * k) for k, name in enumerate(POLICIES)}
    write_report(folder, results, title="<img src=x onerror=alert('title')>", scenario_description="a </script> b")
    return folder / "report.html"


def test_twelve_policies_fit_1280px_with_whole_legends_and_no_injection(tmp_path):
    binary = chromium_or_skip()
    page = twelve_policy_report(tmp_path)
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text() + f"<script>{_MEASURE.read_text()}</script>\n")
    rendered = render(binary, probe, width=1280)
    assert rendered.console == []  # no alert, no error
    found = re.search(r'data-checks="([^"]*)"', rendered.dom)
    assert found, "the measuring script did not finish"
    checks = json.loads(html.unescape(found.group(1)))
    assert checks["width"] == 1280 and checks["plots"] == checks["blocks"] >= 8
    assert checks["overflow"] == [], "a table is wider than the page at 1,280 px"
    assert checks["legends"] and all(legend["inside"] for legend in checks["legends"]), checks["legends"]
    assert all(legend["scroll"] == 0 for legend in checks["legends"]), "a legend is cut (it scrolls)"
    assert "<img" not in rendered.dom and "<script>alert" not in rendered.dom  # both shown as text
    legend = {html.unescape(text) for text in re.findall(r'class="legendtext"[^>]*>([^<]+)<', rendered.dom)}
    assert HOSTILE in legend  # plotly shows the name literally, tags and all
