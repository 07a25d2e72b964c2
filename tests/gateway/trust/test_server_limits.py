"""Issue 25: a stalled body is cut ``body_chunk_timeout_s`` after its last chunk (not up to twice that)."""

from __future__ import annotations

import time

from tests.gateway.http.test_server import _COMPLETION, post_headers, read_all, served


def test_a_stalled_body_is_cut_one_chunk_timeout_after_its_last_chunk() -> None:
    with served(body_chunk_timeout_s=1.0, body_timeout_s=10.0) as server, server.connect() as sock:
        sock.sendall(post_headers(len(_COMPLETION)))
        time.sleep(0.1)
        sock.sendall(_COMPLETION[:10])  # just after the first check began: the buggy check sees it late
        last_chunk = time.monotonic()
        data, _ = read_all(sock)
        stalled_s = time.monotonic() - last_chunk
    assert data.startswith(b"HTTP/1.1 408 ") and b"stalled" in data
    assert 0.9 <= stalled_s < 1.5, stalled_s
