"""The ``server:`` section of the gateway config: limits on client connections (``gateway/http/server.py``).

Defaults are what a gateway facing the public needs: a client that trickles its headers or body is cut off
after seconds, not held forever, and a shutdown ends within ``shutdown_grace_s`` even with a hung backend.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ServerConfig(BaseModel):
    """Seconds (``*_s``), bytes (``*_bytes``) and counts. Every limit answers with an HTTP status before the
    connection closes where one can still be sent: 408 (headers or body too slow), 431 (headers too large),
    503 (too many connections)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # From the connection's opening (or the first byte of a follow-up request) to the end of its headers.
    header_timeout_s: float = Field(default=10.0, gt=0)
    # Longest silence between two body chunks, and the longest a whole body may take to arrive.
    body_chunk_timeout_s: float = Field(default=30.0, gt=0)
    body_timeout_s: float = Field(default=60.0, gt=0)
    max_header_bytes: int = Field(default=65_536, ge=1024)
    max_headers: int = Field(default=100, ge=8)
    max_connections: int = Field(default=2048, ge=1)
    keep_alive_s: float = Field(default=5.0, gt=0)
    max_requests_per_connection: int = Field(default=10_000, ge=1)
    # SIGTERM: stop accepting, let calls in flight finish this long, then cancel them (counted cancelled).
    shutdown_grace_s: float = Field(default=30.0, ge=0)
