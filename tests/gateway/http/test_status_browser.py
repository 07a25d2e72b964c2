"""The status page in headless Chromium (Debian's ``chromium``): after the page's own fetch of /status.json
the DOM shows the instances, request counts, SLO rows and routing decisions, and the console stays empty
(no script error, no CSP violation). Skipped without chromium unless ``SLOSCHED_REQUIRE_BROWSER=1``.
``SLOSCHED_STATUS_SCREENSHOT=PATH`` also saves a screenshot there (docs/status-screenshot.png)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from slosched.contract import HEADER_DEADLINE_MS, HEADER_TENANT, HEADER_TTFT_MS
from tests.gateway.helpers import background_gateway

_CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if _CHROMIUM is None and os.environ.get("SLOSCHED_REQUIRE_BROWSER") != "1":
    pytest.skip("chromium is not installed (apt-get install -y chromium)", allow_module_level=True)

_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=5000",
]


def _chromium(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    assert _CHROMIUM is not None, "SLOSCHED_REQUIRE_BROWSER=1 but chromium is not installed"
    command = [_CHROMIUM, *_FLAGS, f"--user-data-dir={profile}", *extra, url]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _traffic(url: str, headers: dict[str, str]) -> None:
    with httpx.Client(base_url=url, timeout=10, headers=headers) as client:
        for index in range(12):
            slo = {
                HEADER_DEADLINE_MS: "60000",
                HEADER_TTFT_MS: "20000" if index % 3 else "0.001",
                HEADER_TENANT: "gold" if index % 2 else "bronze",
            }
            body = {"prompt": "hello " * 8, "max_tokens": 4, "stream": index % 2 == 0}
            assert client.post("/v1/completions", json=body, headers=slo).status_code == 200


def _cells(dom: str, table: str) -> list[str]:
    body = dom.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", body, re.S)]


def test_status_page_renders_live_data(tmp_path: Path) -> None:
    with background_gateway(num_stubs=2, trust_tenant_header=True) as url:
        _traffic(url, {})
        shot = os.environ.get("SLOSCHED_STATUS_SCREENSHOT")
        if shot:
            _chromium(f"{url}/status", tmp_path / "shot", "--window-size=1280,1100", f"--screenshot={shot}")
        result = _chromium(f"{url}/status", tmp_path / "profile", "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    console = [line for line in result.stderr.splitlines() if "CONSOLE" in line]
    assert not console, console
    instances = _cells(dom, "instances")
    assert instances[:3] == ["b0", "tiny", "healthy"] and "b1" in instances
    assert sum(int(float(cell)) for cell in instances[8::10]) == 12  # routed, one column of ten
    slo = _cells(dom, "slo")
    assert "bronze" in slo and "gold" in slo and "ttft" in slo and "deadline" in slo
    assert any(cell.endswith("%") and cell != "100.0%" for cell in slo)  # the 1 us TTFT SLOs were missed
    decisions = _cells(dom, "decisions")
    assert len(decisions) == 12 * 6 and decisions[1].startswith("req-")
    assert 'id="error" class="error" style="display: none;"' in dom  # the fetch succeeded


def test_status_page_sends_the_fragment_key(tmp_path: Path) -> None:
    tenants = {"acme": {"api_keys": ["tenant-key"], "act_as": ["*"]}}
    with background_gateway(num_stubs=1, tenants=tenants, operator_api_keys=["op-key"]) as url:
        _traffic(url, {"authorization": "Bearer tenant-key"})
        keyed = _chromium(f"{url}/status#key=op-key", tmp_path / "a", "--dump-dom")
        wrong = _chromium(f"{url}/status#key=tenant-key", tmp_path / "b", "--dump-dom")
    assert keyed.returncode == wrong.returncode == 0
    assert _cells(keyed.stdout, "instances")[0] == "b0"
    assert "status unavailable: HTTP 401" in wrong.stdout and "b0" not in _cells(wrong.stdout, "instances")
