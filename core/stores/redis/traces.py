"""Traces on Redis, and how a trace is stored: packed (``core.stores.codec``), its empty fields
left out and its raw model text referring to its parts, cut to ``max_bytes`` when a trace is
larger. ``tests/integration/test_redis_trace_encoding.py`` pins the stored bytes.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any, Literal, cast

import redis.asyncio as aioredis
from redis.client import NEVER_DECODE

from core.errors import StoreUnavailable
from core.stores.codec import ZLIB, ZLIB_DICT, pack, unpack
from core.stores.protocols import (
    DEFAULT_TRACE_TTL,
)
from core.stores.redis.connection import (
    DEFAULT_PREFIX,
    Client,
    _RedisBase,
    _undecoded,
)
from core.trace import Trace, TraceStep

log = logging.getLogger(__name__)


MAX_TRACES_PER_CONVERSATION = 200
DEFAULT_MAX_TRACES = 100_000
"""Traces kept in all (``redis.max_traces``): saving one more drops the oldest."""
DEFAULT_MAX_TRACE_BYTES = 1024 * 1024
"""Bytes one stored trace takes at most, compressed (``redis.max_trace_bytes``)."""


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

# Replaces a trace with its voted form only if nobody wrote it since it was read (ARGV[1],
# the SHA-1 of what was read): a vote cast at the same moment by another process is read
# again and added to, never overwritten. The trace keeps its TTL.
_VOTE_LUA = """
local stored = redis.call('get', KEYS[1])
if not stored then
    return -1
end
if redis.sha1hex(stored) ~= ARGV[1] then
    return 0
end
redis.call('set', KEYS[1], ARGV[2], 'KEEPTTL')
return 1
"""
VOTE_ATTEMPTS = 64
"""Times a vote reads the trace again when other votes keep changing it under it: each round
lets at least one of the voters through, so as many voting at the same instant all count."""

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
        self._pop_oldest = client.register_script(_POP_OLDEST_TRACES_LUA)
        self._vote_script = client.register_script(_VOTE_LUA)

    async def save(self, trace: Trace) -> None:
        index, recent = self._tagged("traces", trace.conversation), self._recent_key()
        now = time.time()
        score = trace.started_at or now
        value = await self._encoded(trace)
        with self._unavailable("save the trace"):
            if self._cluster:
                await self._save_spread(trace.id, value, index, score, now)
                return
            client = cast(aioredis.Redis, self._client)  # not a cluster: one transaction
            async with client.pipeline(transaction=True) as pipe:
                self._queue_save(pipe, trace.id, value, index, score, now)
                if self._max_traces:
                    # EVAL, not the registered script: a pipeline holding a ``Script`` asks
                    # SCRIPT EXISTS first, one more round trip on every save. The server
                    # caches the script by its hash all the same.
                    pipe.eval(
                        _DROP_OLDEST_TRACES_LUA,
                        1,
                        recent,
                        self._max_traces,
                        self._key("trace", ""),
                    )
                await pipe.execute()

    async def _encoded(self, trace: Trace) -> bytes:
        text = stored_json(trace)
        if len(text) > LARGE_TRACE_CHARS:
            return await asyncio.to_thread(encode_trace_json, text, max_bytes=self._max_bytes)
        return encode_trace_json(text, max_bytes=self._max_bytes)

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

    async def vote(self, run_id: str, value: Literal["up", "down"], by: str) -> bool:
        """Read, voted on, and written back only if unchanged since the read (``_VOTE_LUA``);
        read again when another vote came first."""
        key = self._key("trace", run_id)
        for _ in range(VOTE_ATTEMPTS):
            with self._unavailable("load the trace to vote on"):
                raw = await _undecoded(self._client, "GET", key)
            if raw is None:
                return False
            trace = decode_trace(raw)
            trace.vote(value, by, time.time())
            voted = await self._encoded(trace)
            read = hashlib.sha1(raw, usedforsecurity=False).hexdigest()
            with self._unavailable("record a vote"):
                done = int(await self._vote_script(keys=[key], args=[read, voted]))
            if done != 0:
                return done == 1
        raise StoreUnavailable(f"a vote on {run_id} lost to others {VOTE_ATTEMPTS} times")


TRACE_ZLIB = ZLIB
"""The format byte of traces stored zlib-compressed without a dictionary (read, no longer
written). Traces stored before it are plain JSON text, which starts with ``{``."""
TRACE_FORMAT = ZLIB_DICT
"""The format byte of a trace stored now: its compact JSON compressed with ``core.stores.codec``'s
dictionary. All three forms read back (``decode_trace``)."""


def encode_trace(trace: Trace, *, max_bytes: int | None = None) -> bytes:
    """The stored form of a trace: ``stored_json`` packed (``core.stores.codec.pack``). Traces are
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


def decode_trace(raw: bytes | str) -> Trace:
    """A stored trace in any format: ``TRACE_FORMAT``, the older ``TRACE_ZLIB``, or the
    oldest plain JSON (``core.stores.codec.unpack``)."""
    return Trace.from_dict(_with_raw(json.loads(unpack(raw))))
