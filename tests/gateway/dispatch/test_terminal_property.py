"""Property: over the OpenAI call routes with fault-injecting backends (5xx, hangs, invalid bodies, resets,
broken streams) and clients that disconnect, every accepted call ends in exactly one terminal state:
``accepted_total == sum of outcomes``, no call is left in a queue, and no client ever sees a 5xx other than
the gateway's own 502/503 verdicts."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.devtools.faulty import FAULT_MODES
from tests.gateway.faulty_backend import FAST, faulty_harness

# A last attempt waits the whole first_byte_s (nowhere left to retry): keep it short here.
TIMEOUTS = {**FAST["timeouts"], "first_byte_s": 1.0, "queue_s": 3.0}

_call = st.fixed_dictionaries(
    {
        "path": st.sampled_from(["/v1/completions", "/v1/chat/completions"]),
        "stream": st.booleans(),
        "leave_after_s": st.none() | st.sampled_from([0.0, 0.05, 0.2, 0.5]),
    }
)


async def _one(client: httpx.AsyncClient, call: dict[str, Any]) -> int | None:
    if call["path"] == "/v1/completions":
        body: dict[str, Any] = {"prompt": "p", "max_tokens": 2}
    else:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    body["stream"] = call["stream"]
    task = asyncio.create_task(client.post(call["path"], json=body))
    if call["leave_after_s"] is None:
        return (await task).status_code
    await asyncio.sleep(call["leave_after_s"])
    task.cancel()
    results = await asyncio.gather(task, return_exceptions=True)
    return results[0].status_code if isinstance(results[0], httpx.Response) else None


@settings(max_examples=12, deadline=None)
@given(
    modes=st.lists(st.sampled_from(FAULT_MODES), min_size=2, max_size=2),
    faults=st.lists(st.lists(st.sampled_from(FAULT_MODES), max_size=6), min_size=2, max_size=2),
    calls=st.lists(_call, min_size=1, max_size=10),
)
def test_every_accepted_call_ends_in_exactly_one_terminal_state(
    modes: list[str], faults: list[list[str]], calls: list[dict[str, Any]]
) -> None:
    async def scenario() -> None:
        async with faulty_harness(modes, backend={"max_concurrency": 2, "max_queue": 4}, timeouts=TIMEOUTS) as h:
            for backend, planned in zip(h.backends, faults, strict=True):
                backend.fault.set(backend.fault.mode, 0.1, planned)
            async with httpx.AsyncClient(base_url=h.url, timeout=20) as client:
                statuses = await asyncio.gather(*(_one(client, call) for call in calls))
            assert all(status in (None, 200, 429, 502, 503) for status in statuses), statuses
            await h.settle(15.0)  # raises when a call is left unfinished or in a queue
            outcomes = h.outcomes()
            accepted = h.value("slosched:requests_accepted_total")
            assert sum(outcomes.values()) == accepted
            # A client gone before its body was read is never accepted; one that stayed always is.
            assert statuses.count(None) >= len(calls) - accepted >= 0
            # Completed calls were answered 200, unless the client left as the answer went out.
            assert outcomes.get("completed/ok", 0) <= statuses.count(200) + statuses.count(None)

    asyncio.run(scenario())
