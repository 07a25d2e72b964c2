"""The gateway's live status page: ``/status`` (a self-contained HTML page) refreshing itself every 2 s
from ``/status.json`` (instances, queues, SLO attainment over a recent window, the last routing decisions;
``Dispatcher.snapshot``).

The page holds no data, so it is served to anyone; ``/status.json`` is guarded: by the operator's
``operator_api_keys`` when the config sets any (tenant names and their attainment are the operator's
business), else like every other route. A browser sends no bearer token on navigation, so the page reads
the key from the URL fragment (``/status#key=...``, never sent to the server or its logs) and sends it on
each fetch.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from importlib import resources

# Inline script and style only, fetches to this origin only: nothing external can load or be sent out.
STATUS_PAGE_HEADERS = {
    "cache-control": "no-store",
    "content-security-policy": "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'",
}


@functools.cache
def page_html() -> bytes:
    return resources.files("slosched.gateway.http").joinpath("status_page.html").read_bytes()


def operator_allowed(headers: Mapping[str, str], keys: Iterable[str]) -> bool:
    """True when the bearer token (or ``x-api-key``) is one of ``keys``; compared in constant time."""
    auth = headers.get("authorization", "")
    presented = auth[7:].strip() if auth[:7].lower() == "bearer " else headers.get("x-api-key", "")
    digest = hashlib.sha256(presented.encode()).digest()
    found = False
    for key in keys:
        found |= hmac.compare_digest(digest, hashlib.sha256(key.encode()).digest())
    return found and bool(presented)
