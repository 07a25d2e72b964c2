"""In-process call routes with a clock the test moves and tenants, for the dialect tests: every accepted
call is recorded (its ``Call``, body as the gateway would forward it) and completed at once."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from slosched.core.request import Outcome
from slosched.gateway.calls.call import Call
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.http.hotpath import OpenAIRoutes
from slosched.gateway.ops.config import parse_config
from slosched.gateway.ops.identity import Identities
from slosched.gateway.ops.limits import TenantLimits

BACKENDS = [{"name": "b0", "url": "http://127.0.0.1:9", "model": "tiny", "max_model_len": 4096}]
TENANTS = {
    "acme": {"api_keys": ["sk-acme"], "priority": 2, "min_slo_s": 1.0, "min_ttft_slo_s": 0.2},
    "gold": {"api_keys": ["sk-gold"], "priority": 0},
}


@dataclass
class Routes:
    routes: OpenAIRoutes
    now: list[float] = field(default_factory=lambda: [100.0])
    seen: list[Call] = field(default_factory=list)

    def post(
        self, body: dict[str, Any], headers: dict[str, str] | None = None, path: str = "/v1/completions"
    ) -> tuple[int, dict[str, Any]]:
        sent: list[dict[str, Any]] = []
        raw_body = json.dumps(body).encode()

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": raw_body, "more_body": False}

        async def send(message: Any) -> None:
            sent.append(message)

        raw = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in (headers or {}).items()]
        scope = {"type": "http", "method": "POST", "headers": raw}
        asyncio.run(self.routes(scope, receive, send, path))
        return sent[0]["status"], json.loads(sent[1]["body"])

    @property
    def last(self) -> Call:
        return self.seen[-1]


def make_routes(tenants: dict[str, Any] | None = None) -> Routes:
    config = parse_config({"backends": BACKENDS, "tenants": tenants or {}})
    holder = Routes.__new__(Routes)
    holder.now, holder.seen = [100.0], []
    dispatcher = Dispatcher(config, clock=lambda: holder.now[0])
    identities = Identities.from_config(config)
    limits = TenantLimits(dispatcher.clock, dispatcher.metrics)
    access = type("Access", (), {"identities": identities, "limits": limits})()
    holder.routes = OpenAIRoutes(config, dispatcher, access)

    async def complete(call: Call) -> tuple[int, bytes]:
        holder.seen.append(call)
        dispatcher.finish(call, Outcome.COMPLETED, "ok")
        return 200, b"{}"

    dispatcher.complete = complete  # type: ignore[method-assign]
    return holder


P = {"prompt": "hello", "max_tokens": 8}


def first_call_belief(request: Any, hint: float) -> float:
    """The output-length belief a gateway's first call gets with the client's prior ``hint``: the average of
    the fresh predictor's estimate and the prior (``Dispatcher.accept``), capped at ``max_tokens``."""
    predicted = make_routes().routes.dispatcher.context.output_predictor.predict(request)
    return min(0.5 * (predicted + hint), float(request.max_output_tokens))
