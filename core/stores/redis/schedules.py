"""``core.schedules.ScheduleStore`` on Redis, shared by every process on one server.

Keys (NO TTL: a schedule is kept until it is deleted; docs/operations.md lists them)::

    {prefix}schedules:{schedules}:records   HASH id -> the schedule's JSON
    {prefix}schedules:{schedules}:versions  HASH id -> its version (the compare-and-set token)
    {prefix}schedules:{schedules}:due       ZSET id -> when a process should next look at it
    {prefix}schedules:{schedules}:places    HASH place -> how many schedules it has
    {prefix}schedules:{schedules}:owners    HASH owner -> how many schedules they own

Every key carries the one hash tag ``{schedules}``: on a Cluster all of them lie in one slot,
so the limits (per channel, per person) are checked and the schedule added in one script, and
a schedule's record, version and place in the due index change together. Schedules are few
(hundreds of bytes each, ``schedule.max_per_channel`` per channel), so one slot holds them.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from redis.exceptions import RedisError

from core.errors import StoreUnavailable
from core.schedules import Schedule
from core.stores.redis.connection import DEFAULT_PREFIX, Client

SCHEDULE_KINDS = frozenset({"schedules"})
"""The kind of key (after the prefix) kept without a TTL on purpose."""

_ADD_LUA = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 'exists' end
if tonumber(redis.call('HGET', KEYS[4], ARGV[3]) or '0') >= tonumber(ARGV[5]) then
  return 'per_channel'
end
if tonumber(redis.call('HGET', KEYS[5], ARGV[4]) or '0') >= tonumber(ARGV[6]) then
  return 'per_user'
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[8])
redis.call('HINCRBY', KEYS[4], ARGV[3], 1)
redis.call('HINCRBY', KEYS[5], ARGV[4], 1)
if ARGV[7] ~= '' then redis.call('ZADD', KEYS[3], ARGV[7], ARGV[1]) end
return 'ok'
"""

# KEYS records, versions, due; ARGV id, json, the version it replaces, due score ('' none).
_PUT_LUA = """
local held = redis.call('HGET', KEYS[2], ARGV[1])
if not held or tonumber(held) ~= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], tonumber(ARGV[3]) + 1)
if ARGV[4] == '' then
  redis.call('ZREM', KEYS[3], ARGV[1])
else
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
end
return 1
"""

# KEYS records, versions, due, places, owners; ARGV id, place, owner.
_DELETE_LUA = """
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if redis.call('HINCRBY', KEYS[4], ARGV[2], -1) <= 0 then redis.call('HDEL', KEYS[4], ARGV[2]) end
if redis.call('HINCRBY', KEYS[5], ARGV[3], -1) <= 0 then redis.call('HDEL', KEYS[5], ARGV[3]) end
return 1
"""

# KEYS due, records; ARGV now, limit: the due schedules' records in one round trip.
_DUE_LUA = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #ids == 0 then return {} end
return redis.call('HMGET', KEYS[2], unpack(ids))
"""


@contextmanager
def _unavailable(action: str) -> Iterator[None]:
    try:
        yield
    except (RedisError, OSError) as exc:
        # The class only: a connection error's text may name the server's address and user.
        raise StoreUnavailable(f"Redis failed to {action} ({type(exc).__name__})") from exc


class RedisSchedules:
    def __init__(self, client: Client, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._client = client
        base = f"{prefix}schedules:{{schedules}}:"
        self._records, self._versions, self._due = (
            base + "records",
            base + "versions",
            base + "due",
        )
        self._places, self._owners = base + "places", base + "owners"
        self._add = client.register_script(_ADD_LUA)
        self._put = client.register_script(_PUT_LUA)
        self._delete = client.register_script(_DELETE_LUA)
        self._due_script = client.register_script(_DUE_LUA)

    @property
    def keys(self) -> tuple[str, ...]:
        return (self._records, self._versions, self._due, self._places, self._owners)

    async def add(
        self, schedule: Schedule, *, max_per_place: int, max_per_owner: int
    ) -> Literal["per_channel", "per_user"] | None:
        args: list[str | int] = [
            schedule.id,
            schedule.to_json(),
            schedule.place.key,
            schedule.owner,
            max_per_place,
            max_per_owner,
            _score(schedule),
            schedule.version,
        ]
        keys = [self._records, self._versions, self._due, self._places, self._owners]
        with _unavailable("add a schedule"):
            said = _text(await self._add(keys=keys, args=args))
        if said == "exists":
            raise ValueError(f"schedule {schedule.id} exists")
        return None if said == "ok" else ("per_channel" if said == "per_channel" else "per_user")

    async def get(self, schedule_id: str) -> Schedule | None:
        with _unavailable("read a schedule"):
            raw = await self._client.hget(self._records, schedule_id)
        return Schedule.from_json(raw) if raw is not None else None

    async def every(self) -> builtins.list[Schedule]:
        with _unavailable("list the schedules"):
            raws = await self._client.hvals(self._records)
        return [s for raw in raws if (s := Schedule.from_json(raw)) is not None]

    async def put(self, schedule: Schedule) -> bool:
        keys = [self._records, self._versions, self._due]
        args: list[str | int] = [
            schedule.id,
            schedule.to_json(),
            schedule.version - 1,
            _score(schedule),
        ]
        with _unavailable("save a schedule"):
            return bool(await self._put(keys=keys, args=args))

    async def delete(self, schedule_id: str) -> Schedule | None:
        held = await self.get(schedule_id)
        if held is None:
            return None
        args = [schedule_id, held.place.key, held.owner]
        with _unavailable("delete a schedule"):
            deleted = await self._delete(keys=list(self.keys), args=args)
        return held if deleted else None

    async def due(self, now: float, *, limit: int) -> builtins.list[Schedule]:
        with _unavailable("look for due schedules"):
            raws = await self._due_script(keys=[self._due, self._records], args=[now, limit])
        found = [s for raw in raws if raw is not None and (s := Schedule.from_json(raw))]
        return sorted(found, key=lambda s: s.due_at or 0)


def _score(schedule: Schedule) -> str:
    return "" if schedule.due_at is None else str(schedule.due_at)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
