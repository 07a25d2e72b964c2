"""One conformance suite for every ``JobStore``: memory, SQLite, PostgreSQL and Redis must answer alike.

The server backends run against the real servers of ``conftest.py``; each test starts from an empty
database and may open several store objects over it, as several gateway replicas would.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slosched.gateway.jobs.store import JobRecord, JobStore, open_store
from slosched.gateway.jobs.store.memory import MemoryData, MemoryStore

BACKENDS = ("memory", "sqlite", "postgresql", "redis")


@dataclass
class Backend:
    name: str
    open: Callable[[], JobStore]  # one more store object (replica) over the same database
    reset: Callable[[], None]  # empty the database


def _sqlite_backend(tmp_path: Path) -> Backend:
    import sqlite3

    path = tmp_path / "nested" / "jobs.sqlite3"

    def reset() -> None:
        if path.exists():
            with contextlib.closing(sqlite3.connect(path)) as conn, conn:
                conn.execute("DELETE FROM jobs")
                conn.execute("DELETE FROM heartbeats")

    return Backend("sqlite", lambda: open_store(f"sqlite:///{path}"), reset)


def _postgres_backend(url: str) -> Backend:
    import psycopg

    def reset() -> None:
        with psycopg.connect(url, autocommit=True) as conn, contextlib.suppress(psycopg.errors.UndefinedTable):
            conn.execute("TRUNCATE slosched_jobs, slosched_heartbeats")

    return Backend("postgresql", lambda: open_store(url), reset)


def _redis_backend(url: str) -> Backend:
    import redis

    def reset() -> None:
        with redis.Redis.from_url(url) as client:
            client.flushdb()

    return Backend("redis", lambda: open_store(url), reset)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "memory":
        holder = [MemoryData()]
        made = Backend("memory", lambda: MemoryStore(holder[0]), lambda: holder.__setitem__(0, MemoryData()))
    elif request.param == "sqlite":
        made = _sqlite_backend(tmp_path)
    elif request.param == "postgresql":
        made = _postgres_backend(request.getfixturevalue("postgres_url"))
    else:
        made = _redis_backend(request.getfixturevalue("redis_url"))
    made.reset()
    yield made


def run(backend: Backend, scenario: Callable[..., Awaitable[None]], num_stores: int = 1) -> None:
    async def main() -> None:
        stores = [backend.open() for _ in range(num_stores)]
        try:
            await scenario(*stores)
        finally:
            for store in stores:
                await store.close()

    asyncio.run(main())


def rec(job_id: str, owner: str = "r1", status: str = "running", tenant: str = "acme", **fields: Any) -> JobRecord:
    created = fields.pop("created_unix_s", 1000.0)
    return JobRecord(
        id=job_id,
        tenant=tenant,
        kind="text2sql",
        template="t",
        status=status,
        reason=fields.pop("reason", ""),
        owner=owner,
        created_unix_s=created,
        updated_unix_s=fields.pop("updated_unix_s", created),
        **fields,
    )


def test_put_get_round_trip(backend: Backend) -> None:
    full = rec(
        "job-1",
        slo_s=12.5,
        finish_unix_s=None,
        created_unix_s=1_712_345_678.123456,
        stages=[{"name": "plan", "tokens": 17, "text": "SELECT \u00e9 ;", "score": 0.1 + 0.2, "none": None}],
        state={"submission": {"messages": [{"role": "user", "content": "hi"}]}, "z": 1, "a": [1.5, None]},
    )
    bare = rec("job-2", status="completed", reason="done: ok", finish_unix_s=1_712_345_699.5)

    async def scenario(store: JobStore) -> None:
        await store.put(full)
        await store.put(bare)
        assert await store.get("job-1") == full
        assert await store.get("job-2") == bare
        assert await store.get("job-404") is None
        got = await store.get("job-1")
        assert got is not None and list(got.state) == ["submission", "z", "a"]  # key order kept
        got.stages.append({"x": 1})
        assert await store.get("job-1") == full  # the caller's copy is its own
        ended = replace(full, status="failed", reason="backend down", finish_unix_s=2e9, stages=[], state={})
        await store.put(ended)
        assert await store.get("job-1") == ended

    run(backend, scenario)


def test_a_terminal_record_is_final(backend: Backend) -> None:
    """A cancel written through one replica survives the owner's later progress write."""

    async def scenario(store: JobStore) -> None:
        assert await store.put(rec("j", "owner", "running")) is True
        assert await store.put(rec("j", "owner", "running", reason="stage 2")) is True  # progress replaces
        cancelled = rec("j", "owner", "cancelled", reason="cancelled by client", finish_unix_s=1500.0)
        assert await store.put(cancelled) is True
        assert await store.put(rec("j", "owner", "running", reason="stage 3")) is False  # the late write
        assert await store.put(rec("j", "owner", "completed", finish_unix_s=1600.0)) is False
        assert await store.get("j") == cancelled
        assert await store.count_open("acme") == 0 and await store.owned_open("owner") == []

    run(backend, scenario)


def test_count_open_per_tenant(backend: Backend) -> None:
    async def scenario(store: JobStore) -> None:
        await store.put(rec("a1", tenant="a", status="queued"))
        await store.put(rec("a2", tenant="a", status="running"))
        await store.put(rec("a3", tenant="a", status="completed", finish_unix_s=1.0))
        await store.put(rec("b1", tenant="b", status="cancelled", finish_unix_s=1.0))
        assert (await store.count_open("a"), await store.count_open("b"), await store.count_open("c")) == (2, 0, 0)
        await store.put(rec("a2", tenant="a", status="failed", finish_unix_s=2.0))
        await store.put(rec("b2", tenant="b"))
        assert (await store.count_open("a"), await store.count_open("b")) == (1, 1)
        await store.put(rec("b2", tenant="a"))  # a record may move tenant: counted where it is now
        assert (await store.count_open("a"), await store.count_open("b")) == (2, 0)

    run(backend, scenario)


def test_claim_stale_takes_exactly_the_stale_owners_open_jobs(backend: Backend) -> None:
    async def scenario(store: JobStore) -> None:
        await store.heartbeat("alive", 150.0)
        await store.heartbeat("dead", 10.0)
        await store.heartbeat("dead", 50.0)  # the latest heartbeat counts
        await store.put(rec("j-alive", owner="alive"))
        await store.put(rec("j-dead-2", owner="dead", created_unix_s=2.0))
        await store.put(rec("j-dead-1", owner="dead", status="queued", created_unix_s=1.0))
        await store.put(rec("j-dead-done", owner="dead", status="completed", finish_unix_s=60.0))
        await store.put(rec("j-silent", owner="silent", created_unix_s=3.0))  # never heartbeated
        await store.put(rec("j-mine", owner="me"))
        claimed = await store.claim_stale("me", 100.0)
        assert [r.id for r in claimed] == ["j-dead-1", "j-dead-2", "j-silent"]  # oldest first
        assert all(r.owner == "me" for r in claimed)
        assert claimed[0] == rec("j-dead-1", owner="me", status="queued", created_unix_s=1.0)
        stored = [await store.get(job_id) for job_id in ("j-alive", "j-dead-done", "j-dead-1")]
        assert [r.owner if r is not None else None for r in stored] == ["alive", "dead", "me"]
        assert [r.id for r in await store.owned_open("me")] == ["j-dead-1", "j-dead-2", "j-silent", "j-mine"]
        assert await store.claim_stale("me", 100.0) == []
        await store.heartbeat("me", 200.0)
        assert await store.claim_stale("other", 100.0) == []  # "me" is alive now
        assert [r.id for r in await store.claim_stale("other", 151.0)] == ["j-alive"]

    run(backend, scenario)


def test_concurrent_claimers_never_share_a_job(backend: Backend) -> None:
    async def scenario(first: JobStore, second: JobStore) -> None:
        # As a replica does: heartbeat, then claim (a claimer with no fresh heartbeat is stale itself).
        await first.heartbeat("ra", 10.0)
        await second.heartbeat("rb", 10.0)
        for round_ in range(3):
            ids = {f"j{round_}-{i:02d}" for i in range(30)}
            for job_id in sorted(ids):
                await first.put(rec(job_id, owner=f"dead-{round_}-{int(job_id[-1]) % 3}"))
            got_a, got_b = await asyncio.gather(first.claim_stale("ra", 1.0), second.claim_stale("rb", 1.0))
            a, b = {r.id for r in got_a}, {r.id for r in got_b}
            assert not a & b and a | b == ids
            for job_id in ids:
                stored = await second.get(job_id)
                assert stored is not None and stored.owner == ("ra" if job_id in a else "rb")
            for job_id in ids:  # end them, so the next round sees only its own
                await first.put(rec(job_id, status="cancelled", finish_unix_s=1.0))

    run(backend, scenario, num_stores=2)


def test_owned_open_and_retention(backend: Backend) -> None:
    async def scenario(store: JobStore) -> None:
        await store.put(rec("o2", created_unix_s=20.0))
        await store.put(rec("o1", created_unix_s=10.0))
        await store.put(rec("other", owner="r2"))
        await store.put(rec("done-10", status="completed", finish_unix_s=10.0))
        await store.put(rec("done-20", status="failed", finish_unix_s=20.0))
        await store.put(rec("cancelled-no-finish", status="cancelled", updated_unix_s=5.0, created_unix_s=1.0))
        await store.put(rec("open-with-finish", finish_unix_s=1.0))
        assert [r.id for r in await store.owned_open("r1")] == ["o1", "o2", "open-with-finish"]
        assert await store.owned_open("nobody") == []
        assert await store.delete_finished_before(15.0) == 2
        assert await store.get("done-10") is None and await store.get("cancelled-no-finish") is None
        assert await store.get("done-20") is not None and await store.get("open-with-finish") is not None
        assert await store.delete_finished_before(15.0) == 0
        assert await store.delete_finished_before(20.0) == 0  # strictly before
        assert await store.delete_finished_before(20.5) == 1

    run(backend, scenario)


# --- random sequences of operations, with the memory store as the model ---------------------------------

_owners = st.sampled_from(["r1", "r2", "r3"])
_times = st.integers(0, 20).map(float)
_put = st.tuples(
    st.just("put"),
    st.sampled_from(["j1", "j2", "j3", "j4", "j5"]),
    _owners,
    st.sampled_from(["queued", "running", "completed", "failed", "cancelled"]),
    st.sampled_from(["a", "b"]),
    _times,
    st.none() | _times,
)
_ops = st.lists(
    st.one_of(
        _put,
        st.tuples(st.just("heartbeat"), _owners, _times),
        st.tuples(st.just("claim"), _owners, _times),
        st.tuples(st.just("count"), st.sampled_from(["a", "b"])),
        st.tuples(st.just("owned"), _owners),
        st.tuples(st.just("retain"), _times),
    ),
    max_size=25,
)


async def apply(store: JobStore, op: tuple[Any, ...]) -> object:
    kind = op[0]
    if kind == "put":
        _, job_id, owner, status, tenant, created, finish = op
        return await store.put(rec(job_id, owner, status, tenant, created_unix_s=created, finish_unix_s=finish))
    if kind == "heartbeat":
        await store.heartbeat(op[1], op[2])
        return None
    if kind == "claim":
        return await store.claim_stale(op[1], op[2])
    if kind == "count":
        return await store.count_open(op[1])
    if kind == "owned":
        return await store.owned_open(op[1])
    return await store.delete_finished_before(op[1])


def test_random_operations_match_the_memory_model(backend: Backend) -> None:
    examples = 60 if backend.name in ("memory", "sqlite") else 25

    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(ops=_ops)
    def check(ops: list[tuple[Any, ...]]) -> None:
        backend.reset()

        async def scenario(store: JobStore) -> None:
            model = MemoryStore()
            for op in ops:
                assert await apply(store, op) == await apply(model, op), op
            for job_id in ("j1", "j2", "j3", "j4", "j5"):
                assert await store.get(job_id) == await model.get(job_id)

        run(backend, scenario)

    check()


def test_two_replicas_never_both_admit_a_tenants_last_job(backend: Backend) -> None:
    """Issue 25 (i): admission is one atomic step in the store: racing replicas fill a limit of 3 exactly."""

    async def scenario(first: JobStore, second: JobStore) -> None:
        await first.put(rec("old", tenant="t"))
        tries = [(first if i % 2 else second).admit(rec(f"n{i}", tenant="t"), 3) for i in range(10)]
        admitted = await asyncio.gather(*tries)
        assert sum(admitted) == 2 and await first.count_open("t") == 3
        assert await second.admit(rec("other", tenant="u"), 3)  # another tenant's count is its own

    run(backend, scenario, num_stores=2)
