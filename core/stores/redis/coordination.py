"""What processes agree on through Redis: event claims, cooldowns, channel settings, token
usage and its holds, shared rate budgets, run slots and the runs in flight.
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
from collections import deque
from collections.abc import Sequence
from contextlib import (
    suppress,
)
from dataclasses import replace
from typing import Any

from redis.asyncio.cluster import RedisCluster

from core.errors import StoreFull
from core.stores.protocols import (
    DEFAULT_CLAIM_TTL,
)
from core.stores.records import (
    Line,
    RunRecord,
    Standing,
    up_to_refusal,
    with_steps,
)
from core.stores.redis.connection import (
    DEFAULT_PREFIX,
    Client,
    _RedisBase,
)

log = logging.getLogger(__name__)


# One round trip: start the window, or say how much of it is left. A key without a TTL
# (never written by us) would block the user forever, so it is given one.
_COOLDOWN_LUA = """
if redis.call('set', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
    return 0
end
local left = redis.call('pttl', KEYS[1])
if left < 0 then
    redis.call('set', KEYS[1], '1', 'PX', ARGV[1])
    return 0
end
return left
"""


# Drop expired slots, then reserve one if fewer than the limit are held: one script, so
# concurrent takes from many processes cannot both see room for one. Redis's own clock. The
# key lives as long as its longest lease: a shorter one taken later must not take the
# others with it.
_TAKE_SLOT_LUA = """
local now = redis.call('time')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now_ms)
if not redis.call('zscore', KEYS[1], ARGV[1])
        and redis.call('zcard', KEYS[1]) >= tonumber(ARGV[2]) then
    return 0
end
redis.call('zadd', KEYS[1], now_ms + tonumber(ARGV[3]), ARGV[1])
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('pexpire', KEYS[1], tonumber(ARGV[3]))
end
return 1
"""


# ---- event claims -------------------------------------------------------------------------


CLAIM_REPLICA_WAIT = 0.1
"""Seconds a claim waits for a replica to hold it (``WAIT``) with ``replicas``."""


class RedisEventClaims(_RedisBase):
    """Claim a platform event id once across all processes: ``SET NX EX``.

    Replication is asynchronous: a primary that dies right after a claim may take it along,
    and the replica promoted in its place would let the redelivered event through. With
    ``replicas`` (1 under Sentinel) each claim is followed, in the same round trip, by
    ``WAIT replicas`` for up to ``CLAIM_REPLICA_WAIT``: a claim a replica has acknowledged
    survives the failover."""

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl_seconds: int = DEFAULT_CLAIM_TTL,
        replicas: int = 0,
    ) -> None:
        super().__init__(client, prefix=prefix)
        self._ttl = ttl_seconds
        self._replicas = replicas

    async def claim(self, event_id: str, *, ttl: float | None = None) -> bool:
        key = self._key("event", event_id)
        ex, px = (self._ttl, None) if ttl is None else (None, max(1, math.ceil(ttl * 1000)))
        try:
            with self._unavailable("claim the event"):
                if not self._replicas:
                    return bool(await self._client.set(key, "1", nx=True, ex=ex, px=px))
                return await self._claim_replicated(key, ex=ex, px=px)
        except StoreFull:
            # A full Redis refuses the SET even when the key exists: a redelivered event must
            # not pass for new. Reads still work: a claim made before is still seen.
            with self._unavailable("check the event's claim"):
                if await self._client.exists(key):
                    return False
            raise  # not claimed before, and cannot be now: the caller decides

    async def _claim_replicated(self, key: str, *, ex: int | None, px: int | None) -> bool:
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.set(key, "1", nx=True, ex=ex, px=px)
            pipe.wait(self._replicas, max(1, int(CLAIM_REPLICA_WAIT * 1000)))
            taken, acknowledged = await pipe.execute()
        if taken and int(acknowledged) < self._replicas:
            log.debug("an event claim reached %s of %d replicas", acknowledged, self._replicas)
        return bool(taken)

    async def release(self, event_id: str) -> None:
        with self._unavailable("release the event's claim"):
            await self._client.delete(self._key("event", event_id))


# ---- cooldowns ----------------------------------------------------------------------------


class RedisCooldowns(_RedisBase):
    """One window per key across all processes: ``SET NX PX``, and ``PTTL`` when refused,
    in one script (one round trip)."""

    def __init__(self, client: Client, *, prefix: str = DEFAULT_PREFIX) -> None:
        super().__init__(client, prefix=prefix)
        self._script = client.register_script(_COOLDOWN_LUA)

    async def hit(self, key: str, seconds: float) -> float:
        if seconds <= 0:
            return 0.0
        window_ms = max(1, math.ceil(seconds * 1000))
        with self._unavailable("check the cooldown"):
            left = await self._script(keys=[self._key("cooldown", key)], args=[window_ms])
        return int(left) / 1000


# ---- channel settings ---------------------------------------------------------------------


class RedisChannelSettings(_RedisBase):
    """``ChannelSettings`` as a hash per channel, ``{prefix}channel:{channel}``, kept until an
    admin changes it (no TTL: a setting is not a cache)."""

    async def get(self, channel: str) -> dict[str, str]:
        with self._unavailable("read the channel's settings"):
            raw = await self._client.hgetall(self._key("channel", channel))
        return {str(k): str(v) for k, v in raw.items()}  # the client decodes responses

    async def put(self, channel: str, name: str, value: str | None) -> None:
        key = self._key("channel", channel)
        with self._unavailable("save the channel's settings"):
            if value is None:
                await self._client.hdel(key, name)
            else:
                await self._client.hset(key, name, value)


# ---- token usage --------------------------------------------------------------------------

# Holds of runs in flight on a day's counters: KEYS are pairs (counter, its holds), ARGV[1] the
# run, ARGV[2] the lease (ms), ARGV[3] the day's end (ms), then pairs (limit, estimate). A
# hold is "until_ms:amount" in the holds hash; expired ones are dropped as they are read. When
# every counter has something left after its count and the other runs' holds, the run holds
# min(estimate, left) on each; the answer is 1 (held) or 0 (refused), then (count, held by
# the other runs) per counter.
_HOLD_USAGE_LUA = """
local now = redis.call('time')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local run = ARGV[1]
local until_ms = now_ms + tonumber(ARGV[2])
local stood = {}
local refused = false
for i = 1, #KEYS / 2 do
    local held_key = KEYS[2 * i]
    local used = tonumber(redis.call('get', KEYS[2 * i - 1]) or '0')
    local held = 0
    local holds = redis.call('hgetall', held_key)
    for j = 1, #holds, 2 do
        local till, amount = string.match(holds[j + 1], '^(%d+):(%d+)$')
        if not till or tonumber(till) <= now_ms then
            redis.call('hdel', held_key, holds[j])
        elseif holds[j] ~= run then
            held = held + tonumber(amount)
        end
    end
    stood[2 * i - 1] = used
    stood[2 * i] = held
    if used + held >= tonumber(ARGV[2 + 2 * i]) then
        refused = true
    end
end
if refused then
    table.insert(stood, 1, 0)
    return stood
end
for i = 1, #KEYS / 2 do
    local left = tonumber(ARGV[2 + 2 * i]) - stood[2 * i - 1] - stood[2 * i]
    local amount = math.min(tonumber(ARGV[3 + 2 * i]), left)
    redis.call('hset', KEYS[2 * i], run, string.format('%d:%d', until_ms, amount))
    redis.call('pexpireat', KEYS[2 * i], math.max(tonumber(ARGV[3]), until_ms))
end
table.insert(stood, 1, 1)
return stood
"""

# Renews a run's holds: KEYS the holds hashes, ARGV[1] the run, ARGV[2] the lease (ms).
_RENEW_USAGE_LUA = """
local now = redis.call('time')
local until_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + tonumber(ARGV[2])
for i = 1, #KEYS do
    local hold = redis.call('hget', KEYS[i], ARGV[1])
    local amount = hold and string.match(hold, '^%d+:(%d+)$')
    if amount then
        redis.call('hset', KEYS[i], ARGV[1], string.format('%d:%d', until_ms, tonumber(amount)))
        if redis.call('pttl', KEYS[i]) < tonumber(ARGV[2]) then
            redis.call('pexpireat', KEYS[i], until_ms)
        end
    end
end
return 0
"""

# Settles a run: KEYS pairs (counter, its holds), ARGV[1] the run, ARGV[2] the day's end (s),
# then an amount per counter, added (when above 0) as the run's hold is dropped.
_SETTLE_USAGE_LUA = """
for i = 1, #KEYS / 2 do
    local amount = tonumber(ARGV[2 + i])
    if amount > 0 then
        redis.call('incrby', KEYS[2 * i - 1], amount)
        redis.call('expireat', KEYS[2 * i - 1], tonumber(ARGV[2]))
    end
    redis.call('hdel', KEYS[2 * i], ARGV[1])
end
return 0
"""


class RedisUsageCounters(_RedisBase):
    """``core.stores.UsageCounters``: ``{prefix}usage:{day}:{scope}:{id}``, INCRBY and
    EXPIREAT in one step, so every replica adds to the same count, and beside each counter
    the holds of the runs in flight, ``{prefix}held:{day}:{scope}:{id}``, a hash run ->
    ``until_ms:amount`` checked, taken and settled by scripts on Redis's own clock. On one
    server every counter of a question is held in one script; on a cluster each counter and
    its holds share a hash tag and are held one after another, the ones already held given
    back when a later one refuses (each limit is still checked and held atomically)."""

    def __init__(self, client: Client, *, prefix: str = DEFAULT_PREFIX) -> None:
        super().__init__(client, prefix=prefix)
        self._hold = client.register_script(_HOLD_USAGE_LUA)
        self._renew = client.register_script(_RENEW_USAGE_LUA)
        self._settle = client.register_script(_SETTLE_USAGE_LUA)

    def _pair(self, counter: str) -> list[str]:
        return [self._tagged("usage", counter), self._tagged("held", counter)]

    def _groups(self, count: int) -> list[range]:
        """The counters each script takes: all at once, or one by one on a cluster."""
        if self._cluster:
            return [range(i, i + 1) for i in range(count)]
        return [range(count)] if count else []

    async def add(self, key: str, amount: int, *, expire_at: float) -> int:
        name = self._tagged("usage", key)
        with self._unavailable("count tokens"):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.incrby(name, amount)
                pipe.expireat(name, math.ceil(expire_at))
                count, _ = await pipe.execute()
        return int(count)

    async def get(self, keys: Sequence[str]) -> list[int]:
        if not keys:
            return []
        with self._unavailable("read token counts"):
            names = [self._tagged("usage", k) for k in keys]
            if isinstance(self._client, RedisCluster):  # the counters lie in many slots
                raw = await self._client.mget_nonatomic(names)
            else:
                raw = await self._client.mget(names)
        return [int(v) if v is not None else 0 for v in raw]

    async def hold(
        self, run: str, lines: Sequence[Line], *, lease: float, expire_at: float
    ) -> list[Standing] | None:
        lease_ms = max(1, math.ceil(lease * 1000))
        done: list[Line] = []
        stood: list[Standing] = []
        with self._unavailable("hold a budget"):
            for group in self._groups(len(lines)):
                part = [lines[i] for i in group]
                keys = [name for line in part for name in self._pair(line.counter)]
                limits = [n for line in part for n in (line.limit, line.estimate)]
                args: list[str | int] = [run, lease_ms, math.ceil(expire_at * 1000), *limits]
                held, *raw = await self._hold(keys=keys, args=args)
                stood += [
                    Standing(int(u), int(h)) for u, h in zip(raw[::2], raw[1::2], strict=True)
                ]
                if not int(held):
                    await self._give_back(run, done)
                    return up_to_refusal(lines, stood)
                done += part
        return None

    async def _give_back(self, run: str, lines: Sequence[Line]) -> None:
        if lines:
            await self.settle(run, [line.counter for line in lines], [0] * len(lines), expire_at=0)

    async def renew(self, run: str, counters: Sequence[str], *, lease: float) -> None:
        lease_ms = max(1, math.ceil(lease * 1000))
        with self._unavailable("renew a budget hold"):
            for group in self._groups(len(counters)):
                keys = [self._tagged("held", counters[i]) for i in group]
                await self._renew(keys=keys, args=[run, lease_ms])

    async def settle(
        self, run: str, counters: Sequence[str], amounts: Sequence[int], *, expire_at: float
    ) -> None:
        with self._unavailable("count tokens"):
            for group in self._groups(len(counters)):
                keys = [name for i in group for name in self._pair(counters[i])]
                added = [amounts[i] for i in group]
                await self._settle(keys=keys, args=[run, math.ceil(expire_at), *added])


# ---- rate budgets -------------------------------------------------------------------------

# A sorted set of requests scored by when they stop counting: a request in flight until
# ARGV[5] ms from now (its answer then restamps it), an answered one ``per`` after its answer.
# One request may go when the set holds fewer than limit - reserve; else the answer is how
# long until enough of them stop counting (-1: the reserve alone fills it, -2: requests in
# flight do; ask again soon).
_TAKE_BUDGET_LUA = """
local now = redis.call('time')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now_ms)
local count = redis.call('zcard', KEYS[1])
local over = count + tonumber(ARGV[2]) + 1 - tonumber(ARGV[1])
if over <= 0 then
    redis.call('zadd', KEYS[1], now_ms + tonumber(ARGV[5]), ARGV[4])
    redis.call('pexpire', KEYS[1], tonumber(ARGV[5]) + tonumber(ARGV[3]))
    return 0
end
if over > count then
    return -1
end
local entry = redis.call('zrange', KEYS[1], over - 1, over - 1, 'WITHSCORES')
local left = tonumber(entry[2]) - now_ms
if left > tonumber(ARGV[3]) then
    return -2  -- a request still in flight: its answer restamps it, ask again shortly
end
return math.max(1, left)
"""

# Restamps requests as answered now: they stop counting ``per`` from now.
_DONE_BUDGET_LUA = """
local now = redis.call('time')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
for i = 2, #ARGV do
    redis.call('zadd', KEYS[1], now_ms + tonumber(ARGV[1]), ARGV[i])
end
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], tonumber(ARGV[1]))
end
return 0
"""


class RedisRateBudget(_RedisBase):
    """A rate budget shared by every process (``adapters.pacing.Budget``): at most ``limit``
    requests in any ``per`` seconds, Slack's per-workspace method limits read strictly, kept
    in one sorted set, ``{prefix}budget:{name}``, on Redis's own clock.

    A request counts from when it is taken until ``per`` after its answer; one whose process
    died before the answer stops counting ``per`` + ``in_flight_limit`` after it was taken."""

    def __init__(
        self,
        client: Client,
        name: str,
        *,
        limit: int,
        per: float = 60.0,
        in_flight_limit: float = 30.0,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        super().__init__(client, prefix=prefix)
        self._set = self._key("budget", name)
        self._limit = max(1, limit)
        self._per_ms = max(1, math.ceil(per * 1000))
        self._in_flight_ms = self._per_ms + max(1, math.ceil(in_flight_limit * 1000))
        self._take_script = client.register_script(_TAKE_BUDGET_LUA)
        self._done_script = client.register_script(_DONE_BUDGET_LUA)
        self._mine: deque[str] = deque()
        """This process's requests in flight, oldest first (``done`` restamps the oldest)."""
        self._returns: set[asyncio.Task[Any]] = set()

    @property
    def limit(self) -> int:
        return self._limit

    async def take(self, reserve: int) -> float:
        ticket = secrets.token_hex(8)
        script = asyncio.ensure_future(
            self._take_script(
                keys=[self._set],
                args=[self._limit, reserve, self._per_ms, ticket, self._in_flight_ms],
            )
        )
        with self._unavailable("take from the shared update budget"):
            try:
                # shielded: a caller cancelled while Redis granted the request must give the
                # grant back, or it would count as in flight until it expires
                waited = int(await asyncio.shield(script))
            except asyncio.CancelledError:
                script.add_done_callback(lambda done: self._give_back(done, ticket))
                raise
        if waited == 0:
            self._mine.append(ticket)
            return 0.0
        return {-1: 1.0, -2: 0.05}.get(waited, waited / 1000)

    def _give_back(self, script: asyncio.Future[Any], ticket: str) -> None:
        if script.cancelled() or script.exception() is not None or script.result() != 0:
            return
        task = asyncio.ensure_future(self._forget(ticket))
        self._returns.add(task)
        task.add_done_callback(self._returns.discard)

    async def _forget(self, ticket: str) -> None:
        with suppress(Exception):  # else it expires by itself, ``in_flight_limit`` later
            await self._client.zrem(self._set, ticket)

    async def done(self) -> None:
        if self._mine:
            await self._restamp([self._mine.popleft()])

    async def charge(self, count: int) -> None:
        await self._restamp([secrets.token_hex(8) for _ in range(count)])

    async def _restamp(self, tickets: list[str]) -> None:
        if not tickets:
            return
        with self._unavailable("count a request in the shared update budget"):
            await self._done_script(keys=[self._set], args=[self._per_ms, *tickets])


# ---- run slots ----------------------------------------------------------------------------


class RedisRunSlots(_RedisBase):
    """``RunSlots`` shared by every process: a sorted set of slots scored by lease expiry."""

    def __init__(self, client: Client, *, prefix: str = DEFAULT_PREFIX) -> None:
        super().__init__(client, prefix=prefix)
        self._script = client.register_script(_TAKE_SLOT_LUA)

    async def take(self, key: str, slot: str, *, limit: int, lease: float) -> bool:
        lease_ms = max(1, math.ceil(lease * 1000))
        with self._unavailable("reserve a run slot"):
            taken = await self._script(keys=[self._key("runs", key)], args=[slot, limit, lease_ms])
        return bool(taken)

    async def give_back(self, key: str, slot: str) -> None:
        with self._unavailable("give back a run slot"):
            await self._client.zrem(self._key("runs", key), slot)


# ---- runs in flight ------------------------------------------------------------------------

_CLAIM_RUN_LUA = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  local record = redis.call('HGET', KEYS[2], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  local steps = redis.call('LRANGE', KEYS[3], 0, -1)
  redis.call('DEL', KEYS[3])
  table.insert(steps, 1, record or '')
  return steps
end
return false
"""
_UPDATE_RUN_LUA = """
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
end
for i = 4, #ARGV do
  redis.call('RPUSH', KEYS[3], ARGV[i])
end
return 1
"""


class RedisRunRegistry(_RedisBase):
    """``RunRegistry`` shared by every process: per surface, a hash of run records and a
    sorted set of their heartbeats, and per run a list of the steps added to its record
    since it was written (``{prefix}inflight-steps:{surface}:{run}``, in the surface's hash
    slot). Claiming an orphan removes it from the set first, in one script, so exactly one
    process gets it; an update is a script too, which finds an ended run gone and leaves it
    so. No key has a TTL: a record leaves when its run ends or is claimed (and only runs in
    flight are there)."""

    def __init__(self, client: Client, *, prefix: str = DEFAULT_PREFIX) -> None:
        super().__init__(client, prefix=prefix)
        self._claim = client.register_script(_CLAIM_RUN_LUA)
        self._update = client.register_script(_UPDATE_RUN_LUA)

    def _keys(self, surface: str) -> tuple[str, str]:
        return self._tagged("inflight-beats", surface), self._tagged("inflight", surface)

    def _steps_key(self, surface: str, run_id: str) -> str:
        return f"{self._tagged('inflight-steps', surface)}:{run_id}"

    async def beat(self, records: Sequence[RunRecord], *, at: float) -> None:
        if not records:
            return
        with self._unavailable("register the runs in flight"):
            async with self._client.pipeline(transaction=False) as pipe:
                for record in records:
                    beats, hashed = self._keys(record.surface)
                    pipe.zadd(beats, {record.run_id: at})
                    pipe.hset(hashed, record.run_id, record.to_json())
                    pipe.delete(self._steps_key(record.surface, record.run_id))
                await pipe.execute()

    async def update(
        self,
        surface: str,
        run_id: str,
        *,
        steps: Sequence[str] = (),
        record: RunRecord | None = None,
        at: float,
    ) -> bool:
        beats, hashed = self._keys(surface)
        keys = [beats, hashed, self._steps_key(surface, run_id)]
        args = [run_id, repr(at), record.to_json() if record is not None else "", *steps]
        with self._unavailable("write what changed in a run in flight"):
            return bool(await self._update(keys=keys, args=args))

    async def end(self, surface: str, run_id: str) -> None:
        beats, hashed = self._keys(surface)
        with self._unavailable("unregister a finished run"):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.zrem(beats, run_id)
                pipe.hdel(hashed, run_id)
                pipe.delete(self._steps_key(surface, run_id))
                await pipe.execute()

    async def orphans(self, surface: str, *, silent_since: float, limit: int = 20) -> list[str]:
        beats, _ = self._keys(surface)
        with self._unavailable("look for runs a dead process left"):
            found = await self._client.zrangebyscore(
                beats, "-inf", f"({silent_since}", start=0, num=limit
            )
        return [item.decode() if isinstance(item, bytes) else str(item) for item in found]

    async def claim(self, surface: str, run_id: str) -> RunRecord | None:
        beats, hashed = self._keys(surface)
        keys = [beats, hashed, self._steps_key(surface, run_id)]
        with self._unavailable("take over a run a dead process left"):
            taken = await self._claim(keys=keys, args=[run_id])
        if not taken or not taken[0]:
            return None
        record = RunRecord.from_json(taken[0])
        if record is None or len(taken) == 1:
            return record
        steps = [s.decode() if isinstance(s, bytes) else str(s) for s in taken[1:]]
        return replace(record, trace=with_steps(record.trace, steps))

    async def running(self, surface: str, run_id: str) -> bool:
        beats, _ = self._keys(surface)
        with self._unavailable("look up a run"):
            return await self._client.zscore(beats, run_id) is not None

    async def get(self, surface: str, run_id: str) -> RunRecord | None:
        _, hashed = self._keys(surface)
        with self._unavailable("look up a run"):
            raw = await self._client.hget(hashed, run_id)
        return RunRecord.from_json(raw) if raw else None

    record = get

    async def count(self, surface: str) -> int:
        beats, _ = self._keys(surface)
        with self._unavailable("count the runs in flight"):
            return int(await self._client.zcard(beats))
