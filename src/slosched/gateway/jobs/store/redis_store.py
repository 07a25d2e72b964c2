"""The job store on Redis (redis-py asyncio): for replicas that already share a Redis.

Layout, under a key prefix (``slosched:`` by default): a hash per job (``job:ID``; floats as ``repr`` text,
so they round-trip exactly; ``None`` fields left out; ``stages`` and ``state`` as JSON), the ids of open jobs
per owner (``open:owner:O``) and per tenant (``open:tenant:T``), the owners that hold open jobs
(``owners``), the heartbeats (a hash ``heartbeats``: owner -> Unix seconds), and terminal jobs by finish time
(a sorted set ``finished``, for retention).

Every write that touches more than one key is a Lua script, which Redis runs atomically: a put moves the
job between the sets in the same step as it writes the hash, and ``claim_stale`` checks heartbeats and moves
jobs with no other command in between, so two claimers never both get a job. The scripts name keys built
from the prefix, so this store needs one Redis server (or primary), not Redis Cluster.
"""

from __future__ import annotations

from typing import Any, cast

import orjson
import redis.asyncio as aioredis

from slosched.gateway.jobs.store.base import TERMINAL, JobRecord
from slosched.gateway.jobs.store.rows import dumps, oldest_first

_PUT = """
local p, id, owner, tenant = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local key = p .. 'job:' .. id
local old = redis.call('HMGET', key, 'owner', 'tenant', 'status')
if {terminal} then return 0 end  -- a terminal record is final
if old[1] then
  redis.call('SREM', p .. 'open:owner:' .. old[1], id)
  if redis.call('SCARD', p .. 'open:owner:' .. old[1]) == 0 then redis.call('SREM', p .. 'owners', old[1]) end
end
if old[2] then redis.call('SREM', p .. 'open:tenant:' .. old[2], id) end
redis.call('ZREM', p .. 'finished', id)
redis.call('DEL', key)
redis.call('HSET', key, unpack(ARGV, 7))
if ARGV[5] == '1' then
  redis.call('SADD', p .. 'open:owner:' .. owner, id)
  redis.call('SADD', p .. 'owners', owner)
  redis.call('SADD', p .. 'open:tenant:' .. tenant, id)
else
  redis.call('ZADD', p .. 'finished', ARGV[6], id)
end
return 1
""".replace("{terminal}", " or ".join(f"old[3] == '{status}'" for status in sorted(TERMINAL)))

# The same write, only while the tenant holds fewer open records than the limit (the last argument).
_ADMIT = (
    """
local limit = tonumber(table.remove(ARGV))
if redis.call('SCARD', ARGV[1] .. 'open:tenant:' .. ARGV[4]) >= limit then return 0 end
"""
    + _PUT
)

_CLAIM = """
local p, me, before = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out = {}
for _, o in ipairs(redis.call('SMEMBERS', p .. 'owners')) do
  local beat = redis.call('HGET', p .. 'heartbeats', o)
  if o ~= me and ((not beat) or tonumber(beat) < before) then
    local ids = redis.call('SMEMBERS', p .. 'open:owner:' .. o)
    for _, id in ipairs(ids) do
      redis.call('HSET', p .. 'job:' .. id, 'owner', me)
      redis.call('SADD', p .. 'open:owner:' .. me, id)
      out[#out + 1] = redis.call('HGETALL', p .. 'job:' .. id)
    end
    redis.call('DEL', p .. 'open:owner:' .. o)
    redis.call('SREM', p .. 'owners', o)
    if #ids > 0 then redis.call('SADD', p .. 'owners', me) end
  end
end
return out
"""

_DELETE_FINISHED = """
local p = ARGV[1]
local ids = redis.call('ZRANGEBYSCORE', p .. 'finished', '-inf', '(' .. ARGV[2])
for _, id in ipairs(ids) do
  redis.call('DEL', p .. 'job:' .. id)
  redis.call('ZREM', p .. 'finished', id)
end
return #ids
"""

_TEXT_FIELDS = ("id", "tenant", "kind", "template", "status", "reason", "owner")


def record_fields(record: JobRecord) -> list[str]:
    """The job hash as a flat field, value list (what HSET takes)."""
    fields: list[str] = []
    for name in _TEXT_FIELDS:
        fields += [name, getattr(record, name)]
    fields += ["created_unix_s", repr(record.created_unix_s), "updated_unix_s", repr(record.updated_unix_s)]
    if record.slo_s is not None:
        fields += ["slo_s", repr(record.slo_s)]
    if record.finish_unix_s is not None:
        fields += ["finish_unix_s", repr(record.finish_unix_s)]
    return [*fields, "stages", dumps(record.stages), "state", dumps(record.state)]


def hash_record(fields: dict[str, str]) -> JobRecord:
    slo, finish = fields.get("slo_s"), fields.get("finish_unix_s")
    return JobRecord(
        **{name: fields[name] for name in _TEXT_FIELDS},
        created_unix_s=float(fields["created_unix_s"]),
        updated_unix_s=float(fields["updated_unix_s"]),
        slo_s=None if slo is None else float(slo),
        finish_unix_s=None if finish is None else float(finish),
        stages=orjson.loads(fields["stages"]),
        state=orjson.loads(fields["state"]),
    )


def _lua_number(value: float) -> str:
    # Lua's tonumber reads repr's text exactly, but not "inf" / "nan": clamp to the largest finite double.
    return repr(min(max(value, -1.7976931348623157e308), 1.7976931348623157e308))


def _pairs(flat: list[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


class RedisStore:
    def __init__(self, url: str, prefix: str = "slosched:") -> None:
        self.prefix = prefix
        # Connects on first command; decode_responses gives str, as the hash holds text only.
        self._client: aioredis.Redis = aioredis.Redis.from_url(url, decode_responses=True)
        self._put = self._client.register_script(_PUT)
        self._admit = self._client.register_script(_ADMIT)
        self._claim = self._client.register_script(_CLAIM)
        self._delete_finished = self._client.register_script(_DELETE_FINISHED)

    def _key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    async def put(self, record: JobRecord) -> bool:
        is_open = "0" if record.status in TERMINAL else "1"
        finished = record.finish_unix_s if record.finish_unix_s is not None else record.updated_unix_s
        head = [self.prefix, record.id, record.owner, record.tenant, is_open, repr(finished)]
        return bool(await self._put(keys=[], args=[*head, *record_fields(record)]))

    async def admit(self, record: JobRecord, limit: int) -> bool:
        finished = record.finish_unix_s if record.finish_unix_s is not None else record.updated_unix_s
        head = [self.prefix, record.id, record.owner, record.tenant, "1", repr(finished)]
        return bool(await self._admit(keys=[], args=[*head, *record_fields(record), str(limit)]))

    async def get(self, job_id: str) -> JobRecord | None:
        fields = cast(dict[str, str], await self._client.hgetall(self._key("job", job_id)))
        return hash_record(fields) if fields else None

    async def count_open(self, tenant: str) -> int:
        return int(await self._client.scard(self._key("open", "tenant", tenant)))

    async def heartbeat(self, owner: str, now_unix_s: float) -> None:
        await self._client.hset(self._key("heartbeats"), owner, _lua_number(now_unix_s))

    async def claim_stale(self, owner: str, stale_before_unix_s: float) -> list[JobRecord]:
        flats: list[list[str]] = await self._claim(keys=[], args=[self.prefix, owner, _lua_number(stale_before_unix_s)])
        return oldest_first([hash_record(_pairs(flat)) for flat in flats])

    async def owned_open(self, owner: str) -> list[JobRecord]:
        ids = cast(set[str], await self._client.smembers(self._key("open", "owner", owner)))
        async with self._client.pipeline(transaction=False) as pipe:
            for job_id in sorted(ids):
                pipe.hgetall(self._key("job", job_id))
            found: list[dict[str, Any]] = await pipe.execute()
        # A put between the two round trips may have moved a job on: keep what is still this owner's.
        records = [hash_record(f) for f in found if f]
        return oldest_first([r for r in records if r.owner == owner and r.status not in TERMINAL])

    async def delete_finished_before(self, unix_s: float) -> int:
        return int(await self._delete_finished(keys=[], args=[self.prefix, repr(unix_s)]))

    async def close(self) -> None:
        await self._client.aclose()
