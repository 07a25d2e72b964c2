"""Counting for ``slosched bench chaos``: probes, the verdict on every reply, and bounded HTTP sends.

Every request a probe sends is judged once (``Probe.judge``) into the suite's counters:

- ``clear_4xx``: a 4xx whose body is an OpenAI-style error (``{"error": {"message": ...}}``) of at most
  ``MAX_ERROR_BYTES`` (a clear error never echoes large input back);
- ``server_errors``: any 5xx but a deliberate 502/503/504 carrying an OpenAI-style error (the gateway's
  answer to a backend fault or to overload), and any body showing a Python traceback;
- ``hangs``: requests still unanswered past their bound.

A probe fails (with the first few reasons kept) when one of its replies is not among those it expects: an
unclear 4xx, bad input accepted with a 2xx, a shed without ``Retry-After``, a hang, a server error.
``lost`` and ``isolation_violations`` are counted by the probes that can see them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

MAX_ERROR_BYTES = 1024 + 256  # an error message may quote ~64 chars of input, never kilobytes
MAX_REASONS = 3
# What a probe accepts from one reply: "2xx"; "4xx" (a clear one); "shed" (429/503 with Retry-After);
# "fault" (a clear 502/503/504 after a backend fault).
OK, BAD_INPUT, SHED, FAULT = frozenset({"2xx"}), frozenset({"4xx"}), frozenset({"shed"}), frozenset({"fault"})


@dataclass(slots=True, frozen=True)
class Reply:
    """One request's end: ``status`` None when no response came (``timed_out`` or a connection error)."""

    status: int | None
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    timed_out: bool = False
    error: str = ""

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def clear_error(body: bytes) -> bool:
    """An OpenAI-style error object with a message, short enough not to echo the input back."""
    if len(body) > MAX_ERROR_BYTES:
        return False
    try:
        payload = json.loads(body)
    except ValueError:
        return False
    error = payload.get("error") if isinstance(payload, dict) else None
    return isinstance(error, dict) and isinstance(error.get("message"), str) and bool(error["message"])


def is_server_error(reply: Reply) -> bool:
    if b"Traceback (most recent call last)" in reply.body:
        return True
    status = reply.status
    if status is None or status < 500:
        return False
    return not (status in (502, 503, 504) and clear_error(reply.body))


@dataclass(slots=True)
class Probe:
    """One named check of one family, with its own counts; ``failures`` holds why it failed (first few)."""

    family: str
    name: str
    sent: int = 0
    clear_4xx: int = 0
    server_errors: int = 0
    hangs: int = 0
    lost: int = 0
    isolation_violations: int = 0
    failures: list[str] = field(default_factory=list)
    num_failures: int = 0
    shed: int = 0  # 429/503 answers with Retry-After

    @property
    def passed(self) -> bool:
        return self.num_failures == 0

    def fail(self, reason: str) -> None:
        self.num_failures += 1
        if len(self.failures) < MAX_REASONS:
            self.failures.append(reason[:160])

    def violation(self, reason: str) -> None:
        self.isolation_violations += 1
        self.fail(f"isolation: {reason}")

    def judge(self, reply: Reply, expect: frozenset[str], what: str) -> bool:
        """Count ``reply`` (to the request described by ``what``); True when it is one ``expect`` allows."""
        self.sent += 1
        status = reply.status
        if reply.timed_out:
            self.hangs += 1
            self.fail(f"{what}: no answer within its bound (hang)")
            return False
        if status is None:
            self.fail(f"{what}: connection dropped without a response ({reply.error[:60]})")
            return False
        if is_server_error(reply):
            self.server_errors += 1
            self.fail(f"{what}: server error {status} {reply.body[:60]!r}")
            return False
        clear = clear_error(reply.body)
        if 400 <= status < 500:
            self.clear_4xx += clear
            if status in (429, 503) and "shed" in expect:
                return self._check_retry_after(reply, what)
            if not clear:
                self.fail(f"{what}: {status} without a short OpenAI-style error ({reply.body[:40]!r})")
                return False
            if "4xx" not in expect:
                self.fail(f"{what}: unexpected {status} {_message(reply)}")
                return False
            return True
        if status >= 500:  # a clear 502/503/504
            if status == 503 and "shed" in expect:
                return self._check_retry_after(reply, what)
            if "fault" not in expect:
                self.fail(f"{what}: unexpected {status} {_message(reply)}")
                return False
            return True
        if "2xx" not in expect:
            self.fail(f"{what}: accepted with {status}, expected a refusal")
            return False
        return True

    def _check_retry_after(self, reply: Reply, what: str) -> bool:
        if "retry-after" not in {name.lower() for name in reply.headers}:
            self.fail(f"{what}: {reply.status} without Retry-After")
            return False
        self.shed += 1
        return True


def _message(reply: Reply) -> str:
    payload = reply.json()
    error = payload.get("error") if isinstance(payload, dict) else None
    return repr(str(error.get("message", ""))[:80]) if isinstance(error, dict) else repr(reply.body[:60])


async def send(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    bound_s: float,
    *,
    content: bytes | None = None,
    json_body: Any = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """One request, its whole body read, within ``bound_s`` (a streamed body included)."""
    if json_body is not None:
        content = json.dumps(json_body).encode()
        headers = {"content-type": "application/json", **(headers or {})}

    async def go() -> Reply:
        async with client.stream(method, path, content=content, headers=headers) as response:
            body = await response.aread()
            return Reply(response.status_code, body, dict(response.headers))

    try:
        return await asyncio.wait_for(go(), bound_s)
    except TimeoutError:
        return Reply(None, timed_out=True)
    except httpx.TimeoutException:
        return Reply(None, timed_out=True)
    except (httpx.HTTPError, OSError, ValueError) as error:  # ValueError: UnicodeError, a bad URL
        return Reply(None, error=f"{type(error).__name__}: {error}")


async def gather_limited(coroutines: Iterable[Awaitable[Any]], concurrency: int) -> list[Any]:
    """Run ``coroutines`` with at most ``concurrency`` at once, results in order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(coroutine: Awaitable[Any]) -> Any:
        async with gate:
            return await coroutine

    return await asyncio.gather(*(one(coroutine) for coroutine in coroutines))


def totals(probes: Iterable[Probe], rss_growth_mb: float) -> dict[str, Any]:
    """The suite's JSON line: counts summed over every probe."""
    found = list(probes)
    keys = ("sent", "clear_4xx", "server_errors", "hangs", "lost", "isolation_violations")
    out: dict[str, Any] = {"probes": len(found)}
    out.update({key: sum(getattr(probe, key) for probe in found) for key in keys})
    out["rss_growth_mb"] = round(rss_growth_mb, 1)
    return out


@dataclass(slots=True)
class Ctx:
    """What every probe family gets: the gateway's URL (changes on a restart), the faulty backend's (None:
    no fault injection), the run size, the probes run so far."""

    url: str
    faulty_url: str | None = None
    backend_urls: tuple[str, ...] = ()  # every backend (the outage family takes them all down)
    quick: bool = True
    scale: float = 1.0  # request counts x this (the tests' tiny form: ~0.02)
    bound_s: float = 15.0  # the longest any one request may take (the gateway's timeouts end it sooner)
    legacy: str = ""  # why the tenant config was refused ("" when it was accepted)
    probes: list[Probe] = field(default_factory=list)

    def probe(self, family: str, name: str) -> Probe:
        probe = Probe(family, name)
        self.probes.append(probe)
        return probe

    def count(self, full: int) -> int:
        """A request count: ``full`` for the full form, a third of it for the quick one, x ``scale``."""
        return max(int(full * (1 / 3 if self.quick else 1.0) * self.scale), 1)

    def client(self, limit: int = 64) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=limit, max_keepalive_connections=limit)
        return httpx.AsyncClient(base_url=self.url, timeout=self.bound_s, limits=limits)

    async def fault(self, mode: str, delay_s: float | None = None) -> None:
        if self.faulty_url is None:
            return
        async with httpx.AsyncClient(base_url=self.faulty_url, timeout=5.0) as control:
            body: dict[str, Any] = {"mode": mode} | ({} if delay_s is None else {"delay_s": delay_s})
            (await control.post("/_fault", json=body)).raise_for_status()
