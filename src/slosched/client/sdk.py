"""Python SDK for the slosched gateway: ``Client`` (sync), ``AsyncClient``, and a workflow runner.

``WorkflowRunner.replay`` drives the gateway from a workflow trace (``workloads.trace_io`` JSONL / a list of
``JobSpec``): jobs arrive at their trace times, each stage is posted when its dependencies finished (tool
steps sleep their duration), and every call is a token-id prompt of exactly the trace's input length with
``ignore_eos`` + ``max_tokens`` fixing the output length — so a real vLLM server does the trace's work.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import secrets
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from slosched.client.sse import GatewayError as GatewayError
from slosched.client.sse import StreamError as StreamError
from slosched.client.sse import aiter_openai, iter_openai
from slosched.contract import (
    HEADER_DEADLINE_MS,
    HEADER_PRIORITY,
    HEADER_TENANT,
    HEADER_TPOT_MS,
    HEADER_TTFT_MS,
    tenant_header,
)
from slosched.core.job import CallSpec, JobSpec, StageSpec
from slosched.workloads.prompts import prompt_ids

# Prompt salts: a fresh id space per process, so no two calls share a prompt unless the trace says so.
_SALTS = itertools.count(secrets.randbits(40) << 20)


def slo_headers(
    deadline_ms: float | None = None,
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
    tenant: str | None = None,
    priority: float | None = None,
) -> dict[str, str]:
    pairs = {
        HEADER_DEADLINE_MS: deadline_ms,
        HEADER_TTFT_MS: ttft_ms,
        HEADER_TPOT_MS: tpot_ms,
        HEADER_TENANT: tenant,
        HEADER_PRIORITY: priority,
    }
    return {name: str(value) for name, value in pairs.items() if value is not None}


def _check(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:200]
        retry = response.headers.get("retry-after")
        raise GatewayError(response.status_code, message, float(retry) if retry else None)
    return response.json()


def call_body(call: CallSpec) -> dict[str, Any]:
    """A completions body doing exactly ``call``'s work: a token-id prompt of exactly its length (printable
    ids, unique to the call except the prefix it shares by ``prefix_key``), a fixed output length."""
    prompt = prompt_ids(call.input_tokens, next(_SALTS), call.prefix_key, call.prefix_tokens)
    return {"prompt": prompt, "max_tokens": call.output_tokens, "ignore_eos": True}


def _embeddings_body(input: str | list[str], model: str | None, fields: Mapping[str, Any]) -> dict[str, Any]:
    return {"input": input, **fields, **({"model": model} if model else {})}


class Client:
    """Synchronous client. ``api_key`` is sent as a bearer token when given."""

    def __init__(self, base_url: str = "http://127.0.0.1:8080", api_key: str | None = None, timeout_s: float = 600.0):
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def completions(
        self,
        prompt: str | list[int],
        max_tokens: int = 64,
        *,
        model: str | None = None,
        headers: Mapping[str, str] | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        body = {"prompt": prompt, "max_tokens": max_tokens, **fields, **({"model": model} if model else {})}
        return dict(_check(self.http.post("/v1/completions", json=body, headers=dict(headers or {}))))

    def chat(
        self,
        messages: list[dict[str, str]],
        max_tokens: int = 64,
        *,
        headers: Mapping[str, str] | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        body = {"messages": messages, "max_tokens": max_tokens, **fields}
        return dict(_check(self.http.post("/v1/chat/completions", json=body, headers=dict(headers or {}))))

    def embeddings(
        self,
        input: str | list[str],
        *,
        model: str | None = None,
        headers: Mapping[str, str] | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """``POST /v1/embeddings`` through the gateway (forwarded to a backend serving ``model``)."""
        body = _embeddings_body(input, model, fields)
        return dict(_check(self.http.post("/v1/embeddings", json=body, headers=dict(headers or {}))))

    def stream(
        self, path: str, body: dict[str, Any], headers: Mapping[str, str] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Yield the JSON events of a streamed call (``path`` is /v1/completions or /v1/chat/completions) up to
        ``[DONE]``; an error event raises ``StreamError`` (a ``GatewayError``) carrying the error object."""
        with self.http.stream("POST", path, json={**body, "stream": True}, headers=dict(headers or {})) as response:
            if response.status_code >= 400:
                response.read()
                _check(response)
            yield from iter_openai(response)

    def create_job(
        self, kind: str = "workflow", slo_s: float | None = None, *, tenant: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        """A new job; ``tenant`` (sent as the gateway reads it, ``contract.tenant_header``): act for that
        tenant, which the API key must allow. Its later operations name the same tenant."""
        body = {"kind": kind, **fields, **({"slo_s": slo_s} if slo_s is not None else {})}
        return dict(_check(self.http.post("/v1/jobs", json=body, headers=tenant_header(tenant))))

    def run_stage(
        self, job_id: str, name: str, calls: list[dict[str, Any]], final: bool = False, *, tenant: str | None = None
    ) -> dict[str, Any]:
        body = {"name": name, "calls": calls, "final": final}
        return dict(_check(self.http.post(f"/v1/jobs/{job_id}/stages", json=body, headers=tenant_header(tenant))))

    def complete_job(self, job_id: str, *, tenant: str | None = None) -> dict[str, Any]:
        return dict(_check(self.http.post(f"/v1/jobs/{job_id}/complete", headers=tenant_header(tenant))))

    def job(self, job_id: str, *, tenant: str | None = None) -> dict[str, Any]:
        return dict(_check(self.http.get(f"/v1/jobs/{job_id}", headers=tenant_header(tenant))))

    def relquery(
        self,
        template: str,
        rows: list[dict[str, Any]],
        slo_s: float | None = None,
        params: Mapping[str, Any] | None = None,
        wait_s: float = 600.0,
        order: str = "table",
    ) -> dict[str, Any]:
        """Submit a relQuery and poll until it ends (at most ``wait_s``); ``order``: the order rows are sent
        in (``table``, ``rows`` sorted for prefix reuse, ``fields`` repeated fields first; results keep the
        rows' order)."""
        fields: dict[str, Any] = {"template": template, "rows": rows, "params": dict(params or {})}
        if order != "table":  # a gateway that predates the field refuses it; the default needs none
            fields["order"] = order
        job = self.create_job("relquery", slo_s, **fields)
        deadline = time.monotonic() + wait_s
        while job["status"] == "running" and time.monotonic() < deadline:
            time.sleep(0.1)
            job = self.job(job["id"])
        return job


class AsyncClient:
    """Asynchronous client with the same calls as ``Client`` (plus what the workflow runner needs)."""

    def __init__(self, base_url: str = "http://127.0.0.1:8080", api_key: str | None = None, timeout_s: float = 600.0):
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
        self.http = httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout_s, limits=limits)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def completions(
        self, prompt: str | list[int], max_tokens: int = 64, *, headers: Mapping[str, str] | None = None, **fields: Any
    ) -> dict[str, Any]:
        body = {"prompt": prompt, "max_tokens": max_tokens, **fields}
        return dict(_check(await self.http.post("/v1/completions", json=body, headers=dict(headers or {}))))

    async def chat(
        self,
        messages: list[dict[str, str]],
        max_tokens: int = 64,
        *,
        headers: Mapping[str, str] | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        body = {"messages": messages, "max_tokens": max_tokens, **fields}
        return dict(_check(await self.http.post("/v1/chat/completions", json=body, headers=dict(headers or {}))))

    async def embeddings(
        self,
        input: str | list[str],
        *,
        model: str | None = None,
        headers: Mapping[str, str] | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        body = _embeddings_body(input, model, fields)
        return dict(_check(await self.http.post("/v1/embeddings", json=body, headers=dict(headers or {}))))

    async def stream(
        self, path: str, body: dict[str, Any], headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        async with self.http.stream("POST", path, json={**body, "stream": True}, headers=dict(headers or {})) as resp:
            if resp.status_code >= 400:
                await resp.aread()
                _check(resp)
            async for event in aiter_openai(resp):
                yield event

    async def create_job(
        self, kind: str = "workflow", slo_s: float | None = None, *, tenant: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        """As ``Client.create_job``: ``tenant`` goes where the gateway reads it (``contract.tenant_header``)."""
        body = {"kind": kind, **fields, **({"slo_s": slo_s} if slo_s is not None else {})}
        return dict(_check(await self.http.post("/v1/jobs", json=body, headers=tenant_header(tenant))))

    async def run_stage(
        self, job_id: str, name: str, calls: list[dict[str, Any]], final: bool = False, *, tenant: str | None = None
    ) -> dict[str, Any]:
        body = {"name": name, "calls": calls, "final": final}
        headers = tenant_header(tenant)
        return dict(_check(await self.http.post(f"/v1/jobs/{job_id}/stages", json=body, headers=headers)))

    async def complete_job(self, job_id: str, *, tenant: str | None = None) -> dict[str, Any]:
        return dict(_check(await self.http.post(f"/v1/jobs/{job_id}/complete", headers=tenant_header(tenant))))

    async def job(self, job_id: str, *, tenant: str | None = None) -> dict[str, Any]:
        return dict(_check(await self.http.get(f"/v1/jobs/{job_id}", headers=tenant_header(tenant))))

    async def post_body(self, body: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
        """A raw /v1/completions call (the body as given)."""
        return dict(_check(await self.http.post("/v1/completions", json=body, headers=dict(headers))))


@dataclass(slots=True, frozen=True)
class ReplayResult:
    """One replayed job: its gateway id, end state, latency (client-side) and SLO result."""

    trace_id: str
    job_id: str
    status: str
    latency_s: float
    slo_s: float | None
    slo_met: bool


class WorkflowRunner:
    """Runs trace jobs against a gateway through the job API (replay mode: fixed lengths via ignore_eos)."""

    def __init__(
        self, client: AsyncClient, default_slo_s: float | None = None, time_scale: float = 1.0, direct: bool = False
    ) -> None:
        """``direct``: post each call to /v1/completions instead of the job API (any OpenAI endpoint, e.g. a
        peer router; the remaining job deadline still goes out as ``x-slo-deadline-ms``)."""
        self.client = client
        self.default_slo_s = default_slo_s
        self.time_scale = time_scale
        self.direct = direct

    async def replay(self, jobs: Sequence[JobSpec]) -> list[ReplayResult]:
        """Replay ``jobs`` at their arrival times (scaled by ``time_scale``); one result per job, in order."""
        start = time.monotonic()
        tasks = [asyncio.create_task(self._delayed(job, start)) for job in jobs]
        return list(await asyncio.gather(*tasks))

    async def _delayed(self, job: JobSpec, start: float) -> ReplayResult:
        await asyncio.sleep(max(start + job.arrival_s * self.time_scale - time.monotonic(), 0.0))
        return await self.run_job(job)

    async def run_job(self, job: JobSpec) -> ReplayResult:
        slo_s = job.slo_s if job.slo_s is not None else self.default_slo_s
        begin = time.monotonic()
        if self.direct:
            status = await self._run_stages(job, None, begin + slo_s if slo_s is not None else None)
            latency = time.monotonic() - begin
            met = status == "completed" and (slo_s is None or latency <= slo_s)
            return ReplayResult(job.id, "", status, latency, slo_s, met)
        try:
            # Every trace job replays as a workflow: a relQuery's rows are one stage of parallel calls.
            tenant = _tenant(job)
            created = await self.client.create_job("workflow", slo_s, template=job.template, tenant=tenant)
        except GatewayError as error:
            return ReplayResult(job.id, "", f"rejected:{error.status}", time.monotonic() - begin, slo_s, False)
        job_id = created["id"]
        status = await self._run_stages(job, job_id, None)
        latency = time.monotonic() - begin
        met = status == "completed" and (slo_s is None or latency <= slo_s)
        return ReplayResult(job.id, job_id, status, latency, slo_s, met)

    async def _run_stages(self, job: JobSpec, job_id: str | None, deadline: float | None) -> str:
        deps = job.dependencies()
        done: dict[str, asyncio.Event] = {stage.name: asyncio.Event() for stage in job.stages}
        failed: list[str] = []

        async def run(stage_index: int) -> None:
            stage = job.stages[stage_index]
            for parent in deps[stage.name]:
                await done[parent].wait()
            if not failed:
                if stage.tool_duration_s > 0:
                    await asyncio.sleep(stage.tool_duration_s * self.time_scale)
                if stage.calls:
                    await self._stage_calls(job_id, _tenant(job), stage, deadline, failed)
            done[stage.name].set()

        await asyncio.gather(*(run(index) for index in range(len(job.stages))))
        if failed:
            return "failed"
        if job_id is None:
            return "completed"
        try:
            final = await self.client.complete_job(job_id, tenant=_tenant(job))
        except GatewayError:
            return "failed"
        return str(final["status"])

    async def _stage_calls(
        self, job_id: str | None, tenant: str | None, stage: StageSpec, deadline: float | None, failed: list[str]
    ) -> None:
        calls = stage.calls
        try:
            if job_id is not None:
                answer = await self.client.run_stage(job_id, stage.name, [call_body(c) for c in calls], tenant=tenant)
                if answer["job"]["status"] == "failed":
                    failed.append(answer["job"]["reason"])
                return
            left_ms = None if deadline is None else max((deadline - time.monotonic()) * 1000.0, 1.0)
            headers = slo_headers(deadline_ms=left_ms, tenant=tenant)
            await asyncio.gather(*(self.client.post_body(call_body(c), headers) for c in calls))
        except GatewayError as error:
            failed.append(str(error))


def _tenant(job: JobSpec) -> str | None:
    """The tenant a trace job names (None: the trace's "default", i.e. the API key's own tenant)."""
    return None if job.tenant == "default" else job.tenant


def attainment(results: Sequence[ReplayResult]) -> tuple[float, float]:
    """(SLO attainment, mean latency in seconds) of replayed jobs; (nan, nan) for none."""
    if not results:
        return math.nan, math.nan
    met = sum(result.slo_met for result in results) / len(results)
    return met, sum(result.latency_s for result in results) / len(results)
