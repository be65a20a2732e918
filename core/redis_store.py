"""Redis implementations of the history, trace, lock, claim, cooldown and stop stores.

Imported only when Redis is configured, so ``import core`` never loads redis. Every redis
error leaves this module as ``core.errors.StoreUnavailable`` (``raise ... from exc``), with a
message naming host, port and db but never the URL's credentials.

Keys, all under a configurable prefix (default ``reactbot:``)::

    {prefix}history:{conversation}   LIST of JSON messages (long ones packed, ``core.codec``),
                                     last max_turns*2, TTL 7 days
    {prefix}trace:{trace_id}         STRING, the trace packed (``encode_trace``), TTL 30 days
    {prefix}traces:{conversation}    ZSET trace_id -> started_at, trimmed, TTL 30 days
    {prefix}recent-traces            ZSET trace_id -> started_at of every conversation; beyond
                                     max_traces the oldest traces are deleted with their entry
    {prefix}lock:{conversation}      STRING token, SET NX PX lease
    {prefix}event:{event_id}         STRING, SET NX EX claim TTL (EXISTS when a full Redis
                                     refuses the SET: a claimed event stays claimed)
    {prefix}cooldown:{key}           STRING, SET NX PX window
    {prefix}runs:{key}               ZSET slot -> lease expiry (ms), one script per take
    {prefix}budget:{name}            ZSET request -> when it stops counting (ms), a shared rate budget
    {prefix}usage:{day}:{scope}:{id} STRING tokens counted that UTC day, EXPIREAT its end
    {prefix}held:{day}:{scope}:{id}  HASH run -> "until_ms:amount", what the runs in flight
                                     hold on that counter (``budgets.reserve_*``), PEXPIREAT
                                     the day's end or the last hold's lease, if later
    {prefix}allow:{conversation}     HASH tool -> who allowed it for the conversation, TTL 7 days
    {prefix}files:{conversation}     LIST of JSON passages of attached files, the history's TTL
    {prefix}channel:{channel}        HASH of an admin's settings for the channel: NO TTL, kept
                                     until an admin changes it (``PERSISTENT_KINDS``)
    {prefix}inflight:{surface}       HASH run -> its record, and ``inflight-beats:{surface}``, a
                                     ZSET run -> heartbeat, and ``inflight-steps:{surface}:{run}``,
                                     a LIST of the JSON of the steps finished since the record
                                     was written: NO TTL, a record leaves when its run ends or
                                     is claimed (``PERSISTENT_KINDS``)
    {prefix}search:{query hash}      STRING, a search result packed (``core.tools.search``), PX
                                     ``tools.search.cache_ttl``
    {prefix}stop                     pub/sub channel: JSON {"run": run_id, "by": who}
    {prefix}approval                 pub/sub channel: JSON {"run", "step", "call", decision}
    {prefix}pending:{run}:{step}:{c} STRING, the request waiting for a decision, PX timeout+60s

Stop requests are pub/sub, so one published while a subscriber is disconnected is lost
for it: the person presses Stop again (the button stays until the run ends).

Where the keys live (``RedisTarget``, ``create_client``): one server, the primary a set of
Sentinels names (followed through a failover), or a Redis Cluster, each over TLS with a
``rediss://`` URL. On a cluster the keys of one conversation (history, lock, traces index,
allow, files) and of one surface (inflight, inflight-beats) carry it as a hash tag,
``{prefix}history:{{conversation}}``, and each usage counter and its holds carry the
counter's name (``{prefix}usage:{{2026-12-06:user:ada}}``), so each script and transaction
over them runs on one slot; on one server and Sentinel the names are as listed above.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import math
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
    suppress,
)
from dataclasses import MISSING, asdict, dataclass, fields, replace
from typing import Any, TypeAlias, cast
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import ExponentialBackoff
from redis.client import NEVER_DECODE
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from core.approval import ApprovalRequest, Decision, DecisionHandler, RequestKey, key_of
from core.budgets import Line, Standing, up_to_refusal
from core.codec import ZLIB, ZLIB_DICT, pack, unpack
from core.errors import StoreFull, StoreUnavailable
from core.history import Message
from core.looplag import on_time
from core.stores import (
    DEFAULT_CLAIM_TTL,
    DEFAULT_LOCK_LEASE,
    DEFAULT_TRACE_TTL,
    OnWait,
    RunRecord,
    StopHandler,
    deliver,
    notify_wait,
    renewing,
    with_steps,
)
from core.tools.lookup import Passage
from core.trace import Trace, TraceStep

DEFAULT_PREFIX = "reactbot:"
PERSISTENT_KINDS = frozenset({"channel", "inflight", "inflight-beats", "inflight-steps"})
"""The kinds of key kept without a TTL, on purpose: a channel's settings (what an admin chose
stays until an admin changes it) and the run registry (a record leaves when its run ends or is
claimed). Every other key expires."""
DEFAULT_MAX_TURNS = 10
DEFAULT_HISTORY_TTL = 7 * 24 * 3600
DEFAULT_TIMEOUT = 0.5
POOL_WAIT = 3.0
"""Seconds a command may wait for a free pooled connection (all of them busy)."""
MAX_CONNECTIONS = 100
"""Connections per process; more concurrent commands wait for one (see ``create_client``)."""
MAX_TRACES_PER_CONVERSATION = 200
DEFAULT_MAX_TRACES = 100_000
"""Traces kept in all (``redis.max_traces``): saving one more drops the oldest."""
DEFAULT_MAX_TRACE_BYTES = 1024 * 1024
"""Bytes one stored trace takes at most, compressed (``redis.max_trace_bytes``)."""

STOP_POLL = 1.0
"""Seconds a stop listener waits for a message before checking in again (not a latency:
a message wakes it at once)."""
RECONNECT_MIN, RECONNECT_MAX = 0.1, 2.0

log = logging.getLogger(__name__)

_MESSAGE_KEYS = ("role", "content")
_ROLES = frozenset({"system", "user", "assistant"})

# Deletes the lock only if it still holds our token: after our lease expired, another run
# may own it, and a plain DEL would release *their* lock.
_RELEASE_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""

# Extends the lease only while the lock still holds our token.
_RENEW_LUA = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""


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
# concurrent takes from many processes cannot both see room for one. Redis's own clock.
_TAKE_SLOT_LUA = """
local now = redis.call('time')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now_ms)
if not redis.call('zscore', KEYS[1], ARGV[1])
        and redis.call('zcard', KEYS[1]) >= tonumber(ARGV[2]) then
    return 0
end
redis.call('zadd', KEYS[1], now_ms + tonumber(ARGV[3]), ARGV[1])
redis.call('pexpire', KEYS[1], tonumber(ARGV[3]))
return 1
"""


Client: TypeAlias = aioredis.Redis | RedisCluster
"""One server or a Sentinel-managed primary (``Redis``), or a Redis Cluster."""


def _connection_kwargs(client: Client) -> dict[str, Any]:
    if isinstance(client, RedisCluster):
        return client.get_connection_kwargs()
    kwargs: dict[str, Any] = client.connection_pool.connection_kwargs
    return kwargs


def _describe(client: Client) -> str:
    """host:port/db of the client (the primary's name and its sentinels, or the cluster's
    nodes), for error messages; the password is never part of it."""
    if isinstance(client, RedisCluster):
        nodes = client.get_nodes() or client.nodes_manager.startup_nodes.values()
        return "cluster " + ",".join(sorted(f"{n.host}:{n.port}" for n in nodes)[:6])
    pool = client.connection_pool
    kwargs = pool.connection_kwargs
    if isinstance(pool, SentinelConnectionPool):
        sentinels = ",".join(
            f"{s.connection_pool.connection_kwargs.get('host', '?')}:"
            f"{s.connection_pool.connection_kwargs.get('port', '?')}"
            for s in pool.sentinel_manager.sentinels
        )
        return f"primary {pool.service_name!r} of sentinels {sentinels}/{kwargs.get('db', 0)}"
    if "path" in kwargs:
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


class _RedisBase:
    def __init__(self, client: Client, *, prefix: str) -> None:
        self._client = client
        self._prefix = prefix
        self._cluster = isinstance(client, RedisCluster)

    def _key(self, kind: str, name: str) -> str:
        return f"{self._prefix}{kind}:{name}"

    def _tagged(self, kind: str, name: str) -> str:
        """A key of one conversation (or surface): on a cluster ``name`` is its hash tag,
        ``{prefix}{kind}:{{name}}``, so every key of it lies in one slot and a script or
        transaction over several of them runs on one node. On one server the name is as
        before, so keys written by earlier versions still read."""
        if self._cluster:
            return f"{self._prefix}{kind}:{{{name}}}"
        return self._key(kind, name)

    def _unavailable(self, action: str) -> AbstractContextManager[None]:
        return _unavailable(self._client, action)


@contextmanager
def _unavailable(client: Client, action: str) -> Iterator[None]:
    """Map every redis (and socket) error to ``StoreUnavailable``, credentials scrubbed."""
    try:
        yield
    except (RedisError, OSError) as exc:
        detail = str(exc)
        password = _connection_kwargs(client).get("password")
        if password:
            detail = detail.replace(str(password), "***")
        if is_out_of_memory(exc):
            full = f"Redis at {_describe(client)} is out of memory (OOM, maxmemory reached)"
            raise StoreFull(f"{full}: it refused to {action}") from exc
        message = f"Redis at {_describe(client)} failed to {action}: {detail}"
        raise StoreUnavailable(message) from exc


def is_out_of_memory(exc: BaseException) -> bool:
    """Redis refused a write for want of memory (``-OOM command not allowed when used memory
    > 'maxmemory'``; redis-py drops the ``OOM`` code when it maps the reply to its class)."""
    return isinstance(exc, OutOfMemoryError) or (
        isinstance(exc, ResponseError) and "command not allowed when used memory" in str(exc)
    )


# ---- history ------------------------------------------------------------------------------


class RedisHistoryStore(_RedisBase):
    """``core.history.HistoryStore`` on a Redis list: one round trip to load, one to append.

    With ``store_steps`` the extra keys a message carries (e.g. ``steps``, a compact form of
    the run's steps) are stored too; otherwise only role and content are kept.
    """

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        max_turns: int = DEFAULT_MAX_TURNS,
        ttl_seconds: int = DEFAULT_HISTORY_TTL,
        store_steps: bool = False,
    ) -> None:
        super().__init__(client, prefix=prefix)
        self._max_messages = max_turns * 2
        self._ttl = ttl_seconds
        self._store_steps = store_steps

    def key(self, conversation: str) -> str:
        return self._tagged("history", conversation)

    async def load(self, conversation: str) -> list[Message]:
        with self._unavailable("load history"):
            raw = cast(
                list[bytes],
                await _undecoded(self._client, "LRANGE", self.key(conversation), "0", "-1"),
            )
        return [m for m in map(_decode_message, raw) if m is not None]

    async def append(self, conversation: str, *messages: Message) -> None:
        if messages:
            await self._write(conversation, messages, replace=False)

    async def replace(self, conversation: str, messages: Sequence[Message]) -> None:
        """Swap the whole conversation atomically (used to store a summary)."""
        await self._write(conversation, messages, replace=True)

    async def clear(self, conversation: str) -> None:
        with self._unavailable("clear history"):
            await self._client.delete(self.key(conversation))

    async def _write(
        self, conversation: str, messages: Sequence[Message], *, replace: bool
    ) -> None:
        key = self.key(conversation)
        encoded = [self._encode(m) for m in messages]
        # MULTI/EXEC: the write, the trim and the TTL refresh land together in one round trip.
        with self._unavailable("save history"):
            async with self._client.pipeline(transaction=True) as pipe:
                if replace:
                    pipe.delete(key)
                if encoded:
                    pipe.rpush(key, *encoded)
                    pipe.ltrim(key, -self._max_messages, -1)
                    pipe.expire(key, self._ttl)
                await pipe.execute()

    def _encode(self, message: Message) -> str | bytes:
        """A message's compact JSON, packed (``core.codec``) when that makes it smaller: an
        answer of a few hundred characters takes about half, a short question stays text."""
        data: dict[str, Any] = dict(message)
        if not self._store_steps:
            data = {k: data[k] for k in _MESSAGE_KEYS}
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        if len(text) < PACK_MESSAGES_FROM:
            return text
        packed = pack(text)
        return packed if len(packed) < len(text.encode()) else text


PACK_MESSAGES_FROM = 96
"""Characters of a message's JSON from which it is stored packed (shorter ones gain nothing)."""


def _decode_message(raw: bytes | str) -> Message | None:
    """Parse one stored message, packed or plain JSON (as messages were stored before);
    entries that are not messages are skipped, not fatal."""
    try:
        data = json.loads(unpack(raw))
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("role") not in _ROLES:
        return None
    if not isinstance(data.get("content"), str):
        return None
    return cast(Message, data)


# ---- traces -------------------------------------------------------------------------------


# Beyond ARGV[1] entries in the index of every trace, delete the oldest traces (keys
# ARGV[2] .. id) and their entries: run inside the save's MULTI, so the bound holds at once.
_DROP_OLDEST_TRACES_LUA = """
local over = redis.call('zcard', KEYS[1]) - tonumber(ARGV[1])
if over <= 0 then
    return 0
end
local oldest = redis.call('zrange', KEYS[1], 0, over - 1)
for _, id in ipairs(oldest) do
    redis.call('unlink', ARGV[2] .. id)
end
redis.call('zremrangebyrank', KEYS[1], 0, over - 1)
return over
"""

# The cluster's form of the bound: trace keys lie in other slots than the index, so the
# script only takes the oldest entries out of the index and says which; the caller unlinks
# their traces.
_POP_OLDEST_TRACES_LUA = """
local over = redis.call('zcard', KEYS[1]) - tonumber(ARGV[1])
if over <= 0 then
    return {}
end
local oldest = redis.call('zrange', KEYS[1], 0, over - 1)
redis.call('zremrangebyrank', KEYS[1], 0, over - 1)
return oldest
"""

LARGE_TRACE_CHARS = 64 * 1024
"""A trace's JSON beyond this is compressed (and cut to fit) in a worker thread, so a tool
that returned megabytes does not hold the event loop while it is stored."""


class RedisTraceStore(_RedisBase):
    """Trace JSON under its id with a TTL, plus a per-conversation index ordered by time.

    At most ``max_traces`` traces in all (0: no bound): the index of recent traces orders
    every one, and a save beyond the bound deletes the oldest in the same transaction. Each
    is stored in at most ``max_trace_bytes`` (``encode_trace``).
    """

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl_seconds: int = DEFAULT_TRACE_TTL,
        max_per_conversation: int = MAX_TRACES_PER_CONVERSATION,
        max_traces: int = DEFAULT_MAX_TRACES,
        max_trace_bytes: int | None = DEFAULT_MAX_TRACE_BYTES,
    ) -> None:
        super().__init__(client, prefix=prefix)
        self._ttl = ttl_seconds
        self._max_indexed = max_per_conversation
        self._max_traces = max(0, max_traces)
        self._max_bytes = max_trace_bytes
        self._drop_oldest = client.register_script(_DROP_OLDEST_TRACES_LUA)
        self._pop_oldest = client.register_script(_POP_OLDEST_TRACES_LUA)

    async def save(self, trace: Trace) -> None:
        index, recent = self._tagged("traces", trace.conversation), self._recent_key()
        now = time.time()
        score = trace.started_at or now
        text = stored_json(trace)
        if len(text) > LARGE_TRACE_CHARS:
            value = await asyncio.to_thread(encode_trace_json, text, max_bytes=self._max_bytes)
        else:
            value = encode_trace_json(text, max_bytes=self._max_bytes)
        with self._unavailable("save the trace"):
            if self._cluster:
                await self._save_spread(trace.id, value, index, score, now)
                return
            client = cast(aioredis.Redis, self._client)  # not a cluster: one transaction
            async with client.pipeline(transaction=True) as pipe:
                self._queue_save(pipe, trace.id, value, index, score, now)
                if self._max_traces:
                    await self._drop_oldest(
                        keys=[recent],
                        args=[self._max_traces, self._key("trace", "")],
                        client=pipe,
                    )
                await pipe.execute()

    def _queue_save(
        self, pipe: Any, trace_id: str, value: bytes, index: str, score: float, now: float
    ) -> None:
        pipe.set(self._key("trace", trace_id), value, ex=self._ttl)
        # The conversation's index and the index of recent traces of every one. Index
        # entries outlive nothing: drop those whose trace has expired, and keep each index
        # bounded for very chatty conversations.
        for key in (index, self._recent_key()):
            pipe.zadd(key, {trace_id: score})
            pipe.zremrangebyscore(key, "-inf", f"({now - self._ttl}")
            if key == index or not self._max_traces:
                pipe.zremrangebyrank(key, 0, -self._max_indexed - 1)
            pipe.expire(key, self._ttl)

    async def _save_spread(
        self, trace_id: str, value: bytes, index: str, score: float, now: float
    ) -> None:
        """The save on a cluster, where the trace, its conversation's index and the index of
        every trace lie in three slots (no transaction spans them): the writes in one
        pipeline (a round trip per node), then the oldest beyond ``max_traces`` taken out of
        the index by a script and their traces unlinked. A process that dies between the two
        leaves those traces to their TTL."""
        async with self._client.pipeline(transaction=False) as pipe:
            self._queue_save(pipe, trace_id, value, index, score, now)
            await pipe.execute()
        if not self._max_traces:
            return
        oldest = await self._pop_oldest(keys=[self._recent_key()], args=[self._max_traces])
        if oldest:
            await self._client.unlink(*[self._key("trace", str(i)) for i in oldest])

    async def get(self, trace_id: str) -> Trace | None:
        with self._unavailable("load the trace"):
            raw = await _undecoded(self._client, "GET", self._key("trace", trace_id))
        return decode_trace(raw) if raw is not None else None

    async def list(self, conversation: str, *, limit: int = 20) -> builtins.list[Trace]:
        return await self._indexed(self._tagged("traces", conversation), limit)

    async def _indexed(self, index: str, limit: int) -> builtins.list[Trace]:
        if limit <= 0:
            return []
        with self._unavailable("list traces"):
            ids = cast(builtins.list[str], await self._client.zrevrange(index, 0, limit - 1))
            if not ids:
                return []
            keys = [self._key("trace", i) for i in ids]
            raws = cast(builtins.list[bytes | None], await self._get_undecoded(keys))
        return [decode_trace(raw) for raw in raws if raw is not None]

    async def _get_undecoded(self, keys: builtins.list[str]) -> builtins.list[Any]:
        """The values of ``keys`` as bytes: one MGET, or on a cluster (where they lie in many
        slots) one pipeline of GETs, a round trip per node."""
        if not self._cluster:
            return cast(builtins.list[Any], await _undecoded(self._client, "MGET", *keys))
        async with self._client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.execute_command("GET", key, **{NEVER_DECODE: True})
            replies: builtins.list[Any] = await pipe.execute()
            return replies

    async def recent(self, *, limit: int = 20) -> builtins.list[Trace]:
        """Newest first across conversations, from one index of every saved trace (bounded
        like a conversation's; traces saved before it existed are not in it)."""
        return await self._indexed(self._recent_key(), limit)

    def _recent_key(self) -> str:
        # Not under "traces:", where each conversation's index lives: no name can clash.
        return f"{self._prefix}recent-traces"

    async def last(self, conversation: str) -> Trace | None:
        recent = await self.list(conversation, limit=1)
        return recent[0] if recent else None


TRACE_ZLIB = ZLIB
"""The format byte of traces stored zlib-compressed without a dictionary (read, no longer
written). Traces stored before it are plain JSON text, which starts with ``{``."""
TRACE_FORMAT = ZLIB_DICT
"""The format byte of a trace stored now: its compact JSON compressed with ``core.codec``'s
dictionary. All three forms read back (``decode_trace``)."""


def encode_trace(trace: Trace, *, max_bytes: int | None = None) -> bytes:
    """The stored form of a trace: ``stored_json`` packed (``core.codec.pack``). Traces are
    most of what a conversation stores (thoughts, observations, the model's raw replies,
    which repeat each other: inside one compressed value a repeat costs a few bytes) and
    compress several times over; nothing of the trace is dropped, so it reads back whole and
    replays, unless it would take more than ``max_bytes``: then the longest tool results are
    cut until it fits (``cut_to_fit``). ``trace`` itself is never changed (the thread's
    attachment is made from it, whole)."""
    return encode_trace_json(stored_json(trace), max_bytes=max_bytes)


def stored_json(trace: Trace) -> str:
    """The trace's JSON as it is stored: compact, without the fields that hold their empty
    default (None, "", 0, False, [], of that very type: "" where the default is None stays),
    which ``Trace.from_dict`` gives back, and with each raw reply referring to its thought
    and the answer rather than holding them twice (``_raw_parts``). Fields whose default is
    not empty (a step's ``kind``, ``status``, ``mode``, ``version``) are always written, so a
    later change of a default cannot change an old trace."""
    data = _without_defaults(trace.to_dict(), _EMPTY_TRACE_DEFAULTS)
    data["steps"] = [_without_defaults(step, _EMPTY_STEP_DEFAULTS) for step in data["steps"]]
    for step in data["steps"]:
        parts = _raw_parts(step, data)
        if parts is not None:
            step["raw"] = parts
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _empty_defaults(cls: type) -> dict[str, object]:
    """The fields of ``cls`` whose default is empty, with that default."""
    found: dict[str, object] = {}
    for f in fields(cls):
        if f.default_factory is not MISSING:
            default = f.default_factory()
        elif f.default is not MISSING:
            default = f.default
        else:
            continue
        if default is None or (isinstance(default, str | int | float | list) and not default):
            found[f.name] = default
    for kept in ("id", "steps", "question", "version"):
        found.pop(kept, None)
    return found


def _without_defaults(data: dict[str, Any], defaults: dict[str, object]) -> dict[str, Any]:
    def default(name: str, value: object) -> bool:
        if name not in defaults:
            return False
        empty = defaults[name]
        return type(value) is type(empty) and value == empty

    return {k: v for k, v in data.items() if not default(k, v)}


_EMPTY_TRACE_DEFAULTS = _empty_defaults(Trace)
_EMPTY_STEP_DEFAULTS = _empty_defaults(TraceStep)

RAW_REFERS_FROM = 24
"""Characters of a thought or an answer from which a step's raw reply refers to it."""


def _raw_parts(step: dict[str, Any], trace: dict[str, Any]) -> builtins.list[Any] | None:
    """A step's raw reply without the second copy of its thought and of the answer: the
    reply as a list of its own text and references (``{"f": "thought"}``, ``{"f":
    "answer"}``) to the fields that hold the rest; None when it holds neither whole. Exact
    by construction (``_joined`` gives the same text back), and checked."""
    raw = step.get("raw")
    if not isinstance(raw, str) or not raw:
        return None
    found: builtins.list[tuple[int, str, str]] = []
    for name, text in (("thought", step.get("thought")), ("answer", trace.get("answer"))):
        if isinstance(text, str) and len(text) >= RAW_REFERS_FROM:
            at = raw.find(text)
            if at >= 0:
                found.append((at, name, text))
    parts: builtins.list[Any] = []
    end = 0
    for at, name, text in sorted(found):
        if at < end:  # overlaps the one before: that one is a reference, this stays text
            continue
        if at > end:
            parts.append(raw[end:at])
        parts.append({"f": name})
        end = at + len(text)
    if not parts:
        return None
    if end < len(raw):
        parts.append(raw[end:])
    return parts if _joined(parts, step, trace) == raw else None


def _joined(parts: builtins.list[Any], step: dict[str, Any], trace: dict[str, Any]) -> str:
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            owner = trace if part.get("f") == "answer" else step
            value = owner.get(str(part.get("f")))
            out.append(value if isinstance(value, str) else "")
    return "".join(out)


def _with_raw(data: dict[str, Any]) -> dict[str, Any]:
    """A stored trace's data with each step's raw reply whole again (``_raw_parts``)."""
    for step in data.get("steps") or []:
        if isinstance(step, dict) and isinstance(step.get("raw"), list):
            step["raw"] = _joined(step["raw"], step, data)
    return data


def encode_trace_json(text: str, *, max_bytes: int | None = None) -> bytes:
    """``encode_trace`` of a trace's stored JSON text (pure, so a worker thread may run it)."""
    encoded = pack(text)
    if max_bytes is None or len(encoded) <= max_bytes:
        return encoded
    return cut_to_fit(json.loads(text), len(text), encoded, max_bytes)


CUT_NOTE = "… [cut: {cut:,} characters; the whole result is in the thread's attachment]"
"""Ends a tool result cut to fit ``max_trace_bytes``."""
KEPT_AT_LEAST = 256
"""Characters of a cut result kept before it is cut to nothing but the note."""
_CUT_LAST = ("raw", "reasoning", "thought", "action_input")
"""Step texts cut, longest first, only when the results and attachments alone do not do."""


def cut_to_fit(data: dict[str, Any], chars: int, encoded: bytes, max_bytes: int) -> bytes:
    """The trace ``data`` (its JSON ``chars`` long, ``encoded`` over ``max_bytes``) stored in
    at most ``max_bytes``: the longest tool result is cut (at least by half, more when the
    compression ratio says more is needed), each cut result ending with ``CUT_NOTE``, again
    until it fits; then attachments lose their data, then the model's texts are cut alike.
    A trace that still does not fit (a bound below a bare trace's size) is stored smallest.
    Raw replies are whole text again here (``_with_raw``), so each is cut as it reads."""
    data = _with_raw(data)
    steps = [s for s in data.get("steps") or [] if isinstance(s, dict)]
    cuts = _Cuts(steps)
    size = _Size(chars, encoded)
    if _cut_while_over(cuts, ("observation",), data, size, max_bytes):
        return size.encoded
    for step in steps:
        for attachment in step.get("attachments") or []:
            if isinstance(attachment, dict):
                attachment["data"] = None  # ``TraceAttachment.describe`` says "not kept"
    size = _Size.of(data)
    if len(size.encoded) <= max_bytes or _cut_while_over(cuts, _CUT_LAST, data, size, max_bytes):
        return size.encoded
    log.warning(
        "a trace takes %d bytes even cut (redis.max_trace_bytes %d)", len(size.encoded), max_bytes
    )
    return size.encoded


@dataclass(slots=True)
class _Size:
    chars: int
    encoded: bytes

    @classmethod
    def of(cls, data: dict[str, Any]) -> _Size:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return cls(len(text), pack(text))

    def excess_chars(self, max_bytes: int) -> int:
        """Characters of JSON to remove, by the compression ratio so far, to land just
        under the bound (5% below it: the ratio of what is left differs a little)."""
        ratio = max(len(self.encoded) / max(1, self.chars), 1e-6)
        return math.ceil((len(self.encoded) - 0.95 * max_bytes) / ratio)


def _cut_while_over(
    cuts: _Cuts, fields: Sequence[str], data: dict[str, Any], size: _Size, max_bytes: int
) -> bool:
    """Cut the longest of ``fields`` until the trace fits (True; ``size`` updated)."""
    while cuts.cut_longest(fields, excess_chars=size.excess_chars(max_bytes)):
        new = _Size.of(data)
        size.chars, size.encoded = new.chars, new.encoded
        if len(size.encoded) <= max_bytes:
            return True
    return False


class _Cuts:
    """The texts of each step as they were, and how much of each is kept now."""

    def __init__(self, steps: builtins.list[dict[str, Any]]) -> None:
        self._steps = steps
        self._whole: dict[tuple[int, str], str] = {}
        self._kept: dict[tuple[int, str], int] = {}

    def cut_longest(self, fields: Sequence[str], *, excess_chars: int) -> bool:
        """Cut the longest of ``fields`` still cuttable; False when none is left."""
        candidates = [
            (self._kept.get((i, f), len(step[f])), i, f)
            for i, step in enumerate(self._steps)
            for f in fields
            if isinstance(step.get(f), str)
        ]
        candidates = [c for c in candidates if c[0] > KEPT_AT_LEAST]
        if not candidates:
            return False
        kept, i, name = max(candidates)
        whole = self._whole.setdefault((i, name), self._steps[i][name])
        keep = min(kept // 2, kept - excess_chars)
        keep = keep if keep >= KEPT_AT_LEAST else 0
        self._kept[(i, name)] = keep
        self._steps[i][name] = whole[:keep] + CUT_NOTE.format(cut=len(whole) - keep)
        return True


async def _undecoded(client: Client, *command: str) -> Any:
    """``command``'s reply as bytes: the client decodes replies as text, which compressed
    values are not."""
    return await client.execute_command(*command, **{NEVER_DECODE: True})


def decode_trace(raw: bytes | str) -> Trace:
    """A stored trace in any format: ``TRACE_FORMAT``, the older ``TRACE_ZLIB``, or the
    oldest plain JSON (``core.codec.unpack``)."""
    return Trace.from_dict(_with_raw(json.loads(unpack(raw))))


# ---- locks --------------------------------------------------------------------------------


class RedisLocks(_RedisBase):
    """A lease lock per conversation, shared by every process on this Redis.

    ``SET NX PX`` with a random token; released by a compare-and-delete script. A crashed
    holder blocks its conversation for at most ``lease_seconds``; a live one renews the lease
    every third of it (compare-and-``PEXPIRE``) for up to ``hold_at_most``, so a run may
    outlast the lease (a person deciding on an approval pauses the run's deadline). Waiters
    poll with a short exponential backoff.
    """

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        lease_seconds: float = DEFAULT_LOCK_LEASE,
        hold_at_most: float | None = None,
        poll_min: float = 0.02,
        poll_max: float = 0.25,
    ) -> None:
        super().__init__(client, prefix=prefix)
        self._lease_ms = int(lease_seconds * 1000)
        self._hold_at_most = max(lease_seconds, hold_at_most or lease_seconds)
        """The longest a live holder keeps the lock by renewing it (a longest healthy run)."""
        self._poll_min = poll_min
        self._poll_max = poll_max
        self._release_script = client.register_script(_RELEASE_LUA)
        self._renew_script = client.register_script(_RENEW_LUA)
        self._releasing: set[asyncio.Task[None]] = set()
        """Releases retried in the background (``_release_soon``)."""

    @asynccontextmanager
    async def hold(
        self, conversation: str, *, on_wait: OnWait | None = None
    ) -> AsyncIterator[None]:
        key = self._tagged("lock", conversation)
        token = secrets.token_hex(16)
        await self._acquire(key, token, on_wait)
        try:
            async with renewing(
                lambda: self._renew(key, token),
                every=self._lease_ms / 3000,
                until=self._hold_at_most - self._lease_ms / 1000,
                what=f"the lock of {conversation}",
            ):
                yield
        finally:
            await self._release(key, token)

    async def _renew(self, key: str, token: str) -> None:
        with self._unavailable("renew the conversation lock"):
            await self._renew_script(keys=[key], args=[token, self._lease_ms])

    async def _acquire(self, key: str, token: str, on_wait: OnWait | None) -> None:
        if await self._try_set(key, token):
            return
        await notify_wait(on_wait)
        delay = self._poll_min
        # Terminates: the holder releases, or its lease expires.
        while not await self._try_set(key, token):
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._poll_max)

    async def _try_set(self, key: str, token: str) -> bool:
        try:
            with self._unavailable("take the conversation lock"):
                return bool(await self._client.set(key, token, nx=True, px=self._lease_ms))
        except StoreUnavailable:
            # A reply that timed out may hide a SET that took: the lock would then block the
            # conversation for a whole lease. Our token is ours alone, so deleting it is safe.
            self._release_soon(key, token)
            raise

    async def _release_once(self, key: str, token: str) -> None:
        with self._unavailable("release the conversation lock"):
            await self._release_script(keys=[key], args=[token])

    async def _release(self, key: str, token: str) -> None:
        try:
            await self._release_once(key, token)
        except StoreUnavailable:
            # Failing here would hide the run's own outcome; the next question in this
            # conversation would wait out the lease: try again in the background.
            self._release_soon(key, token)

    RELEASE_RETRIES = (0.2, 1.0, 3.0, 10.0)
    """Seconds before each background attempt to release a lock (then the lease decides)."""

    def _release_soon(self, key: str, token: str) -> None:
        async def retry() -> None:
            for pause in self.RELEASE_RETRIES:
                await asyncio.sleep(pause)
                try:
                    await self._release_once(key, token)
                except StoreUnavailable:
                    continue
                return
            log.warning("a conversation lock was not released; its lease will free it")

        task = asyncio.get_running_loop().create_task(retry())
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)


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

    async def claim(self, event_id: str) -> bool:
        key = self._key("event", event_id)
        try:
            with self._unavailable("claim the event"):
                if not self._replicas:
                    return bool(await self._client.set(key, "1", nx=True, ex=self._ttl))
                return await self._claim_replicated(key)
        except StoreFull:
            # A full Redis refuses the SET even when the key exists: a redelivered event must
            # not pass for new. Reads still work: a claim made before is still seen.
            with self._unavailable("check the event's claim"):
                if await self._client.exists(key):
                    return False
            raise  # not claimed before, and cannot be now: the caller decides

    async def _claim_replicated(self, key: str) -> bool:
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.set(key, "1", nx=True, ex=self._ttl)
            pipe.wait(self._replicas, max(1, int(CLAIM_REPLICA_WAIT * 1000)))
            taken, acknowledged = await pipe.execute()
        if taken and int(acknowledged) < self._replicas:
            log.debug("an event claim reached %s of %d replicas", acknowledged, self._replicas)
        return bool(taken)


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
    """``core.budgets.UsageCounters``: ``{prefix}usage:{day}:{scope}:{id}``, INCRBY and
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

    async def record(self, surface: str, run_id: str) -> RunRecord | None:
        _, hashed = self._keys(surface)
        with self._unavailable("look up a run"):
            raw = await self._client.hget(hashed, run_id)
        return RunRecord.from_json(raw) if raw else None

    async def count(self, surface: str) -> int:
        beats, _ = self._keys(surface)
        with self._unavailable("count the runs in flight"):
            return int(await self._client.zcard(beats))


# ---- stop requests ------------------------------------------------------------------------


class _RedisChannel(_RedisBase):
    """``PUBLISH`` of JSON objects on one channel; each subscription is one listener task
    on its own pub/sub connection, which reconnects (with backoff) when Redis goes away and
    comes back. Subclasses say what a message holds (``_deliver``)."""

    kind = "messages"

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        name: str,
        ready_timeout: float = 2 * DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(client, prefix=prefix)
        self.channel = f"{prefix}{name}"
        self._ready_timeout = ready_timeout

    async def _publish(self, data: dict[str, Any]) -> None:
        with self._unavailable(f"publish the {self.kind}"):
            await self._client.publish(self.channel, json.dumps(data, ensure_ascii=False))

    @asynccontextmanager
    async def _subscription(self, deliver: Callable[[dict[str, Any]], None]) -> AsyncIterator[None]:
        subscribed = asyncio.Event()
        task = asyncio.create_task(
            self._listen(deliver, subscribed), name=f"{self.kind} listener {self.channel}"
        )
        try:
            # Waits (briefly) for the subscription so messages right after start are heard;
            # a Redis that is down does not hold start-up: the task keeps trying.
            with suppress(TimeoutError):
                async with asyncio.timeout(self._ready_timeout):
                    await subscribed.wait()
            yield
        finally:
            task.cancel()
            await asyncio.wait({task})

    async def _listen(
        self, deliver: Callable[[dict[str, Any]], None], subscribed: asyncio.Event
    ) -> None:
        delay = RECONNECT_MIN
        failing = False
        while True:
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                if isinstance(self._client, RedisCluster):
                    # A cluster's pub/sub picks its node from the slot map, which the client
                    # only has once it has spoken to the cluster (a PUBLISH on any node
                    # reaches the subscribers of every node).
                    await self._client.initialize()
                await pubsub.subscribe(self.channel)
                subscribed.set()
                if failing:
                    log.info("%s: listening on Redis again", self.kind)
                failing, delay = False, RECONNECT_MIN
                while True:
                    message = await pubsub.get_message(
                        ignore_subscribe_messages=True, timeout=STOP_POLL
                    )
                    if message is not None:
                        decoded = _json_object(message.get("data"))
                        if decoded is not None:
                            deliver(decoded)
            except (RedisError, OSError) as exc:
                if not failing:
                    log.warning(
                        "%s: Redis at %s unreachable (%s); retrying",
                        self.kind,
                        _describe(self._client),
                        type(exc).__name__,
                    )
                failing = True
            finally:
                with suppress(RedisError, OSError):
                    # cast: aclose is untyped before redis-py 8.2 and typed from it
                    await cast(Any, pubsub).aclose()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX)


def _json_object(data: object) -> dict[str, Any] | None:
    """A message's JSON object; anything else on the channel is ignored."""
    try:
        decoded = json.loads(data) if isinstance(data, str | bytes) else None
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None


class RedisStopRequests(_RedisChannel):
    """Stop requests on ``{prefix}stop``: ``{"run": run_id, "by": who, "by_id": their id}``
    (``by_id`` absent from older processes' requests)."""

    kind = "stop requests"

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        ready_timeout: float = 2 * DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(client, prefix=prefix, name="stop", ready_timeout=ready_timeout)

    async def request(self, run_id: str, *, by: str, by_id: str = "") -> None:
        await self._publish({"run": run_id, "by": by, "by_id": by_id})

    def subscribe(self, handler: StopHandler) -> AbstractAsyncContextManager[None]:
        def delivered(data: dict[str, Any]) -> None:
            run_id, by, by_id = data.get("run"), data.get("by"), data.get("by_id", "")
            if isinstance(run_id, str) and isinstance(by, str):
                deliver(handler, run_id, by, by_id if isinstance(by_id, str) else "")

        return self._subscription(delivered)


class RedisDecisions(_RedisChannel):
    """Approval decisions on ``{prefix}approval``: the request's key and the decision."""

    kind = "approval decisions"

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        ready_timeout: float = 2 * DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(client, prefix=prefix, name="approval", ready_timeout=ready_timeout)

    async def publish(self, key: RequestKey, decision: Decision) -> None:
        run_id, step, call = key
        await self._publish({"run": run_id, "step": step, "call": call, **decision.to_dict()})

    def subscribe(self, handler: DecisionHandler) -> AbstractAsyncContextManager[None]:
        def delivered(data: dict[str, Any]) -> None:
            run_id, step, call = data.get("run"), data.get("step"), data.get("call")
            decision = Decision.from_dict(data)
            if (
                isinstance(run_id, str)
                and isinstance(step, int)
                and isinstance(call, int)
                and decision is not None
            ):
                try:
                    handler((run_id, step, call), decision)
                except Exception:
                    log.exception("a decision handler failed for run %s", run_id)

        return self._subscription(delivered)


class RedisPending(_RedisBase):
    """``{prefix}pending:{run}:{step}:{call}``: a request waiting for a decision, as JSON,
    expiring a minute after its own timeout."""

    async def put(self, request: ApprovalRequest) -> None:
        data = json.dumps(asdict(request), ensure_ascii=False)
        ms = max(1, math.ceil((request.timeout + 60) * 1000))
        with self._unavailable("store the pending request"):
            await self._client.set(self._pending_key(key_of(request)), data, px=ms)

    async def get(self, key: RequestKey) -> ApprovalRequest | None:
        with self._unavailable("read the pending request"):
            raw = await self._client.get(self._pending_key(key))
        if raw is None:
            return None
        try:
            return ApprovalRequest(**json.loads(raw))
        except (ValueError, TypeError):
            return None

    async def drop(self, key: RequestKey) -> None:
        with self._unavailable("drop the pending request"):
            await self._client.delete(self._pending_key(key))

    def _pending_key(self, key: RequestKey) -> str:
        run_id, step, call = key
        return self._key("pending", f"{run_id}:{step}:{call}")


class RedisAllowances(_RedisBase):
    """``{prefix}allow:{conversation}``, a HASH tool -> who allowed it, with the history's TTL
    (an allowance lasts as long as the conversation it belongs to)."""

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl_seconds: int = DEFAULT_HISTORY_TTL,
    ) -> None:
        super().__init__(client, prefix=prefix)
        self._ttl = ttl_seconds

    async def allowed(self, conversation: str, tool: str) -> str | None:
        with self._unavailable("read the allowances"):
            by = await self._client.hget(self._tagged("allow", conversation), tool.lower())
        return str(by) if by is not None else None

    async def allow(self, conversation: str, tool: str, *, by: str) -> None:
        key = self._tagged("allow", conversation)
        with self._unavailable("store the allowance"):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.hset(key, tool.lower(), by)
                pipe.expire(key, self._ttl)
                await pipe.execute()


class RedisFileStore(_RedisBase):
    """``core.files.FileStore``: ``{prefix}files:{conversation}``, a LIST of JSON passages
    with the history's TTL (the files last as long as the conversation they belong to)."""

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl_seconds: int = DEFAULT_HISTORY_TTL,
    ) -> None:
        super().__init__(client, prefix=prefix)
        self._ttl = ttl_seconds

    def key(self, conversation: str) -> str:
        return self._tagged("files", conversation)

    async def load(self, conversation: str) -> builtins.list[Passage]:
        """The passages, and the TTL renewed: files live as long as the conversation is used."""
        key = self.key(conversation)
        with self._unavailable("load the conversation's files"):
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.lrange(key, 0, -1)
                pipe.expire(key, self._ttl)
                raw, _ = await pipe.execute()
        return [p for p in map(_decode_passage, cast(builtins.list[str], raw)) if p is not None]

    async def add(self, conversation: str, passages: Sequence[Passage]) -> None:
        if not passages:
            return
        key = self.key(conversation)
        encoded = [
            json.dumps([p.file, list(p.headings), p.text], ensure_ascii=False) for p in passages
        ]
        with self._unavailable("store the conversation's files"):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.rpush(key, *encoded)
                pipe.expire(key, self._ttl)
                await pipe.execute()

    async def clear(self, conversation: str) -> None:
        with self._unavailable("drop the conversation's files"):
            await self._client.delete(self.key(conversation))


def _decode_passage(raw: str) -> Passage | None:
    try:
        file, headings, text = json.loads(raw)
    except (ValueError, TypeError):
        return None
    if not (isinstance(file, str) and isinstance(text, str) and isinstance(headings, list)):
        return None
    return Passage(file, tuple(str(h) for h in headings), text)


# ---- wiring -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RedisStores:
    client: Client
    history: RedisHistoryStore
    traces: RedisTraceStore
    locks: RedisLocks
    claims: RedisEventClaims
    cooldowns: RedisCooldowns
    stops: RedisStopRequests
    slots: RedisRunSlots
    runs: RedisRunRegistry
    decisions: RedisDecisions
    pending: RedisPending
    allowances: RedisAllowances
    channel_settings: RedisChannelSettings
    files: RedisFileStore
    usage: RedisUsageCounters

    @property
    def address(self) -> str:
        """``Redis at host:port/db``, for logs; the URL's credentials are never part of it."""
        return f"Redis at {_describe(self.client)}"

    async def ping(self) -> None:
        """Raise ``StoreUnavailable`` unless the server answers (for a startup check)."""
        with _unavailable(self.client, "answer PING"):
            await self.client.ping()

    async def memory(self) -> tuple[int, int]:
        """Bytes the server uses and its ``maxmemory`` (0: no limit), from ``INFO memory``;
        on a cluster, those of the primary nearest its limit (each node fills by itself)."""
        with _unavailable(self.client, "report its memory"):
            if not isinstance(self.client, RedisCluster):
                info = await self.client.info("memory")
                return int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))
            figures = []
            for node in self.client.get_primaries():
                info = await self.client.info("memory", target_nodes=node)
                figures.append((int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))))
        return max(figures, key=lambda f: (f[1] > 0 and f[0] / f[1], f[0]), default=(0, 0))

    async def eviction_policy(self) -> str | None:
        """The server's ``maxmemory-policy`` (on a cluster, the first primary's that may evict,
        else the first's), or None when it cannot be read: ``CONFIG`` is refused on many
        managed servers (or renamed), and the server may be away."""
        try:
            if isinstance(self.client, RedisCluster):
                replies = [
                    await self.client.config_get("maxmemory-policy", target_nodes=node)
                    for node in self.client.get_primaries()
                ]
            else:
                replies = [await self.client.config_get("maxmemory-policy")]
        except (RedisError, OSError) as exc:
            log.debug("cannot read maxmemory-policy from %s: %s", self.address, exc)
            return None
        policies = [
            str(reply["maxmemory-policy"])
            for reply in replies
            if isinstance(reply, dict) and reply.get("maxmemory-policy")
        ]
        evicting = [p for p in policies if evicts_what_guards_correctness(p)]
        chosen = evicting or policies
        return chosen[0] if chosen else None

    async def aclose(self) -> None:
        await close_client(self.client)


def evicts_what_guards_correctness(policy: str) -> bool:
    """Whether ``maxmemory-policy`` may evict keys with a TTL: event claims, locks, run slots
    and pending approvals all have one, and an evicted claim lets a redelivered event be
    answered twice. Only ``noeviction`` keeps them (a full server refuses writes instead)."""
    return policy.startswith(("volatile-", "allkeys-"))


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """Where the stores live: one server (``url``), the primary a set of Sentinels names
    (``sentinels``, ``sentinel_service``; ``url`` then gives only the scheme, credentials and
    db), or a Redis Cluster that ``url`` names a node of (``cluster``). A ``rediss://`` url
    means TLS, verified by ``tls_ca_file`` (else the system's CAs), with a client
    certificate when ``tls_cert_file`` is set; Sentinels are reached the same way."""

    url: str | None = None
    sentinels: tuple[tuple[str, int], ...] = ()
    sentinel_service: str | None = None
    cluster: bool = False
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_check_hostname: bool = True

    @property
    def tls(self) -> bool:
        return urlsplit(self.url or "").scheme == "rediss"

    def tls_kwargs(self) -> dict[str, Any]:
        """redis-py's ``ssl_*`` arguments; nothing without TLS (a plain connection takes
        none of them)."""
        if not self.tls:
            return {}
        kwargs: dict[str, Any] = {
            "ssl_cert_reqs": "required",
            "ssl_check_hostname": self.tls_check_hostname,
        }
        if self.tls_ca_file:
            kwargs["ssl_ca_certs"] = self.tls_ca_file
        if self.tls_cert_file:
            kwargs["ssl_certfile"] = self.tls_cert_file
            kwargs["ssl_keyfile"] = self.tls_key_file
        return kwargs


def parse_host_port(text: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:26379`` too) as a pair."""
    host, _, port = text.strip().rpartition(":")
    return host.strip("[]"), int(port)


class _ReadsOnTime:
    """A connection whose connects, writes and reads time out after
    ``socket_connect_timeout`` and ``socket_timeout`` of the loop's punctual time
    (``core.looplag.on_time``): a connection or a reply that came while the loop was late is
    taken, not failed. A dead or hung server still fails them in that time."""

    socket_timeout: float | None
    socket_connect_timeout: float | None

    async def _connect(self) -> None:
        base = cast(Any, super())
        limit = self.socket_connect_timeout
        self.socket_connect_timeout = None  # redis-py's own limit off for this connect
        try:
            async with on_time(limit):  # its TimeoutError: redis-py's "Timeout connecting"
                await base._connect()
        finally:
            self.socket_connect_timeout = limit

    async def read_response(
        self,
        disable_decoding: bool = False,
        timeout: float | None = None,  # noqa: ASYNC109 - redis-py's own signature
        *,
        disconnect_on_error: bool = True,
        push_request: bool | None = False,
    ) -> Any:
        base = cast(Any, super())
        limit = self.socket_timeout
        if timeout is not None or limit is None:  # the caller's own limit (pub/sub polls)
            return await base.read_response(
                disable_decoding,
                timeout,
                disconnect_on_error=disconnect_on_error,
                push_request=push_request,
            )
        try:
            async with on_time(limit):
                return await base.read_response(
                    disable_decoding,
                    math.inf,  # no limit of its own: ours, below
                    disconnect_on_error=disconnect_on_error,
                    push_request=push_request,
                )
        except TimeoutError:  # ours: the read was cancelled, and disconnected if asked
            raise RedisTimeoutError(f"Timeout reading from Redis after {limit:g} s") from None

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        """A write limited by ``on_time`` too. Not only for punctuality: redis-py limits a
        write with ``asyncio.wait_for``, which before Python 3.12 swallows a cancellation that
        arrives as the write completes (CPython gh-86296), and the command then goes on as
        if its task had not been cancelled. A lease's renewal that lost its cancellation
        kept renewing the lease of a run that had ended: the conversation stayed locked and
        the run's message stuck at "Writing the answer" (issue 25's soak)."""
        base = cast(Any, super())
        limit = self.socket_timeout
        if not limit:
            return await base.send_packed_command(command, check_health)  # type: ignore[no-any-return]
        if not base.is_connected:
            await base.connect_check_health(check_health=False)
        if check_health:
            await base.check_health()
        self.socket_timeout = None  # redis-py's own limit (and its wait_for) off for this write
        try:
            async with on_time(limit):
                await base.send_packed_command(command, check_health=False)
        except TimeoutError:  # ours: the write was cancelled, and redis-py disconnected
            raise RedisTimeoutError(f"Timeout writing to Redis after {limit:g} s") from None
        finally:
            self.socket_timeout = limit


_ON_TIME_CLASSES: dict[type[Any], type[Any]] = {}


def _reading_on_time(connection_class: type[Any]) -> type[Any]:
    if issubclass(connection_class, _ReadsOnTime):
        return connection_class
    made = _ON_TIME_CLASSES.get(connection_class)
    if made is None:
        name = f"OnTime{connection_class.__name__}"
        made = _ON_TIME_CLASSES[connection_class] = type(name, (_ReadsOnTime, connection_class), {})
    return made


def _cluster_on_time(cluster: RedisCluster) -> None:
    """The cluster's connections read and write on time too (``_ReadsOnTime``): redis-py's
    ``RedisCluster`` takes no connection class, so the one its nodes are built with (the
    nodes known now, and those it learns from ``CLUSTER SLOTS``) is set after the fact.
    Before any connection is made: the client connects on first use."""
    manager = cast(Any, cluster).nodes_manager
    kwargs = manager.connection_kwargs
    kwargs["connection_class"] = _reading_on_time(kwargs["connection_class"])
    for node in manager.startup_nodes.values():
        node.connection_class = _reading_on_time(node.connection_class)


class _WaitsOnTime:
    """A ``BlockingConnectionPool`` whose wait for a free connection counts only the loop's
    punctual time (``core.looplag.on_time``). The wait is a sign that every connection is
    busy, not that the server is gone; while the loop is late, the connections' holders are
    late to give them back, and with redis-py's plain timeout a burst lost its memory for
    want of a connection that was about to be free (issue 25: a 3 s wait failed while the
    loop ran seconds late). Its connections read on time too (``_ReadsOnTime``)."""

    def __init__(self, *args: Any, timeout: float | None = POOL_WAIT, **kwargs: Any) -> None:
        connection_class = kwargs.pop("connection_class", None)
        if connection_class is not None:
            kwargs["connection_class"] = _reading_on_time(connection_class)
        super().__init__(*args, timeout=None, **kwargs)  # type: ignore[call-arg]
        self.wait_at_most = timeout
        base = cast(Any, self)
        base.connection_class = _reading_on_time(base.connection_class)

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        try:
            async with on_time(self.wait_at_most):
                return await cast(Any, super()).get_connection(*args, **kwargs)
        except TimeoutError as err:
            raise RedisConnectionError("No connection available.") from err


class OnTimePool(_WaitsOnTime, aioredis.BlockingConnectionPool):
    """One server's pool (``create_client``): commands past ``max_connections`` wait their
    turn, in the loop's punctual time."""


class BlockingSentinelPool(_WaitsOnTime, SentinelConnectionPool, aioredis.BlockingConnectionPool):
    """The Sentinel-managed primary's pool, waiting for a free connection like the one
    server's (``create_client``) instead of refusing a command past ``max_connections``."""


def create_client(target: str | RedisTarget, *, timeout: float = DEFAULT_TIMEOUT) -> Client:
    """One client whose every operation fails within about a second when Redis is gone.

    redis-py's defaults (5 s socket timeouts, 10 retries with backoff) can stall a turn
    for many seconds; here a dead or hanging server costs two short attempts. ``target``
    is a URL (one server) or a ``RedisTarget``.
    """
    if isinstance(target, str):
        target = RedisTarget(url=target)
    common: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": Retry(ExponentialBackoff(cap=0.2, base=0.05), 1),
        "health_check_interval": 30,
        **target.tls_kwargs(),
    }
    if target.sentinels:
        return _sentinel_client(target, common, timeout=timeout)
    if target.url is None:
        raise ValueError("a Redis url is needed without sentinels")
    if target.cluster:
        # Each node has its own connections (``MAX_CONNECTIONS`` of them); the cluster
        # client retries a command itself after MOVED/ASK or a node's failover.
        del common["health_check_interval"]
        cluster = RedisCluster.from_url(target.url, max_connections=MAX_CONNECTIONS, **common)
        _cluster_on_time(cluster)
        return cluster
    # redis-py's pool refuses a command outright ("Too many connections") once
    # max_connections (100 by default) are busy: a burst of conversations would lose their
    # memory. This pool makes a command wait for a free connection instead. That wait is not
    # a sign of a dead server (each busy connection gives up within ``timeout``), so it may
    # last longer: under a burst, failing it would send the bot "without memory" for a while.
    pool = OnTimePool.from_url(
        target.url, max_connections=MAX_CONNECTIONS, timeout=max(POOL_WAIT, timeout), **common
    )
    return aioredis.Redis.from_pool(pool)


def _sentinel_client(target: RedisTarget, common: dict[str, Any], *, timeout: float) -> Client:
    """The primary the sentinels name, through redis-py's ``Sentinel``: each new connection
    asks them where it is, so after a failover the next attempt reaches the promoted
    replica (and a write to a demoted primary, refused READONLY, drops its connection)."""
    account: dict[str, Any] = {}
    if target.url:
        parsed = parse_url(target.url)
        account = {k: v for k, v in parsed.items() if k in ("username", "password", "db")}
    reach = {k: v for k, v in common.items() if k.startswith(("socket_", "ssl_"))}
    # cast: Sentinel's constructor is untyped before redis-py 8.2 and typed from it
    sentinel = cast(Any, Sentinel)(
        list(target.sentinels),
        sentinel_kwargs={**reach, **({"ssl": True} if target.tls else {})},
    )
    return cast(
        aioredis.Redis,
        sentinel.master_for(
            target.sentinel_service or "mymaster",
            redis_class=aioredis.Redis,
            connection_pool_class=BlockingSentinelPool,
            max_connections=MAX_CONNECTIONS,
            timeout=max(POOL_WAIT, timeout),
            ssl=target.tls,
            **account,
            **common,
        ),
    )


async def close_client(client: Client) -> None:
    """Close ``client`` and, for a Sentinel-managed primary, the clients of its sentinels."""
    await client.aclose()
    if not isinstance(client, RedisCluster):
        pool = client.connection_pool
        if isinstance(pool, SentinelConnectionPool):
            await pool.sentinel_manager.aclose()


def connect(
    target: str | RedisTarget,
    *,
    prefix: str = DEFAULT_PREFIX,
    max_turns: int = DEFAULT_MAX_TURNS,
    history_ttl: int = DEFAULT_HISTORY_TTL,
    store_steps: bool = False,
    trace_ttl: int = DEFAULT_TRACE_TTL,
    max_traces: int = DEFAULT_MAX_TRACES,
    max_trace_bytes: int | None = DEFAULT_MAX_TRACE_BYTES,
    lock_lease: float = DEFAULT_LOCK_LEASE,
    lock_hold_at_most: float | None = None,
    claim_ttl: int = DEFAULT_CLAIM_TTL,
    timeout: float = DEFAULT_TIMEOUT,
) -> RedisStores:
    """Build the stores on one client. No I/O: the client connects on first use,
    so a Redis that is down at start-up does not stop the bot (see ``core.resilient``)."""
    client = create_client(target, timeout=timeout)
    sentinel = isinstance(target, RedisTarget) and bool(target.sentinels)
    return RedisStores(
        client=client,
        history=RedisHistoryStore(
            client,
            prefix=prefix,
            max_turns=max_turns,
            ttl_seconds=history_ttl,
            store_steps=store_steps,
        ),
        traces=RedisTraceStore(
            client,
            prefix=prefix,
            ttl_seconds=trace_ttl,
            max_traces=max_traces,
            max_trace_bytes=max_trace_bytes,
        ),
        locks=RedisLocks(
            client, prefix=prefix, lease_seconds=lock_lease, hold_at_most=lock_hold_at_most
        ),
        claims=RedisEventClaims(
            client, prefix=prefix, ttl_seconds=claim_ttl, replicas=1 if sentinel else 0
        ),
        cooldowns=RedisCooldowns(client, prefix=prefix),
        stops=RedisStopRequests(client, prefix=prefix),
        slots=RedisRunSlots(client, prefix=prefix),
        runs=RedisRunRegistry(client, prefix=prefix),
        decisions=RedisDecisions(client, prefix=prefix),
        pending=RedisPending(client, prefix=prefix),
        allowances=RedisAllowances(client, prefix=prefix, ttl_seconds=history_ttl),
        channel_settings=RedisChannelSettings(client, prefix=prefix),
        files=RedisFileStore(client, prefix=prefix, ttl_seconds=history_ttl),
        usage=RedisUsageCounters(client, prefix=prefix),
    )
