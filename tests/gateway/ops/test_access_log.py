"""The access log: one JSON line per accepted call, whatever its outcome, on stdout when the config asks."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import httpx
import pytest

from slosched.gateway.ops.access_log import ACCESS_LOGGER, enable_access_log
from tests.gateway.helpers import harness

FIELDS = {
    "ts", "request_id", "job_id", "tenant", "path", "model", "backend", "outcome", "reason", "stream",
    "attempts", "prompt_tokens", "output_tokens", "latency_s", "ttft_s", "deadline_met",
}  # fmt: skip


@pytest.fixture(autouse=True)
def _detached() -> Iterator[None]:
    yield
    enable_access_log(False)  # the handler holds this test's stream: never leak it to the next test


def test_every_accepted_call_has_one_line_with_its_outcome(capsys: pytest.CaptureFixture[str]) -> None:
    async def scenario() -> float:
        async with harness(access_log=True) as h, httpx.AsyncClient(base_url=h.url) as client:
            headers = {"x-slo-deadline-ms": "60000", "x-request-id": "client-7"}
            r = await client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 3}, headers=headers)
            assert r.status_code == 200
            streamed = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}
            assert (await client.post("/v1/chat/completions", json=streamed)).status_code == 200
            for stub in h.stubs:
                stub.behaviour.status = 500
            assert (await client.post("/v1/completions", json={"prompt": "x", "max_tokens": 2})).status_code >= 500
            assert (await client.post("/v1/completions", json={"prompt": "x", "max_tokens": "2"})).status_code == 400
            return h.value("slosched:requests_accepted_total")

    accepted = asyncio.run(scenario())
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert len(lines) == accepted == 3  # the refused body was never a call
    assert all(set(line) == FIELDS for line in lines)
    first, second, third = lines
    assert (first["request_id"], first["outcome"], first["output_tokens"], first["deadline_met"]) == (
        "client-7",
        "completed",
        3,
        True,
    )
    assert first["backend"] in ("b0", "b1") and 0 <= first["ttft_s"] <= first["latency_s"]
    assert (second["path"], second["stream"], second["output_tokens"], second["deadline_met"]) == (
        "/v1/chat/completions",
        True,
        4,
        None,
    )
    assert third["outcome"] == "failed" and third["output_tokens"] == 0


def test_it_attaches_once_and_detaches_back_to_the_logging_configuration() -> None:
    stream = io.StringIO()
    enable_access_log(True, stream)
    enable_access_log(True, stream)  # attached once, however often a reloaded config is applied
    ACCESS_LOGGER.info("x")
    assert stream.getvalue() == "x\n"
    enable_access_log(False)
    ACCESS_LOGGER.info("y")
    assert stream.getvalue() == "x\n"
    assert (ACCESS_LOGGER.level, ACCESS_LOGGER.propagate) == (logging.NOTSET, True)
    assert not any(handler.get_name() == "slosched-access-stdout" for handler in ACCESS_LOGGER.handlers)
