"""Every store in this process: the embedded default (one process, nothing survives a
restart), each bounded so a stream of new conversations cannot grow memory without bound.
"""

from __future__ import annotations

import asyncio
import builtins
import heapq
import logging
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Literal

from core.llm import Message
from core.stores.protocols import (
    DEFAULT_CLAIM_TTL,
    DEFAULT_LOCK_LEASE,
    DEFAULT_TRACE_TTL,
    Clock,
    OnWait,
    StopHandler,
    TraceStore,
)
from core.stores.records import (
    ApprovalRequest,
    Decision,
    DecisionHandler,
    Line,
    RequestKey,
    RunRecord,
    Standing,
    key_of,
    up_to_refusal,
    with_steps,
)
from core.stores.waiting import deliver, notify_wait, renewing
from core.tools import ToolResult
from core.tools.lookup import Passage
from core.trace import Trace, attachment_bytes

log = logging.getLogger(__name__)

# ---- history ------------------------------------------------------------------------------


class InMemoryHistoryStore:
    """Keeps the last ``max_turns`` question/answer pairs per conversation in this process,
    for at most ``max_conversations`` conversations: past that, the least recently used one
    is forgotten, so a stream of new channels or DMs cannot grow memory without bound."""

    def __init__(self, *, max_turns: int = 10, max_conversations: int = 10_000) -> None:
        self._max_messages = max_turns * 2
        self._max_conversations = max_conversations
        self._data: OrderedDict[str, deque[Message]] = OrderedDict()

    async def load(self, conversation: str) -> list[Message]:
        messages = self._data.get(conversation)
        if messages is None:
            return []
        self._data.move_to_end(conversation)
        return list(messages)

    async def append(self, conversation: str, *messages: Message) -> None:
        stored = self._data.get(conversation)
        if stored is None:
            stored = self._data[conversation] = deque(maxlen=self._max_messages)
            while len(self._data) > self._max_conversations:
                self._data.popitem(last=False)
        self._data.move_to_end(conversation)
        stored.extend(messages)

    async def clear(self, conversation: str) -> None:
        self._data.pop(conversation, None)

    def __len__(self) -> int:
        return len(self._data)


# ---- traces -------------------------------------------------------------------------------


@dataclass(slots=True)
class _StoredTrace:
    trace: Trace
    expires_at: float


class InMemoryTraceStore:
    """Traces in this process, bounded by count (oldest saved go first) and by age; the bytes
    of tools' attachments are bounded too (``max_attachment_bytes``: past it, the oldest
    traces keep only their attachments' type and size)."""

    def __init__(
        self,
        *,
        max_traces: int = 1000,
        ttl_seconds: float = DEFAULT_TRACE_TTL,
        max_attachment_bytes: int = 32 * 1024 * 1024,
        clock: Clock = time.time,
    ) -> None:
        self._max_traces = max_traces
        self._max_attachment_bytes = max_attachment_bytes
        self._ttl = ttl_seconds
        self._clock = clock
        self._traces: OrderedDict[str, _StoredTrace] = OrderedDict()

    async def save(self, trace: Trace) -> None:
        # Stored as JSON text round-tripped, so later mutation of the live Trace cannot leak in.
        copy = Trace.from_json(trace.to_json())
        self._traces.pop(trace.id, None)
        self._traces[trace.id] = _StoredTrace(copy, self._clock() + self._ttl)
        while len(self._traces) > self._max_traces:
            self._traces.popitem(last=False)
        self._bound_attachments()

    def _bound_attachments(self) -> None:
        kept = sum(attachment_bytes(s.trace) for s in self._traces.values())
        for stored in self._traces.values():  # oldest first
            if kept <= self._max_attachment_bytes:
                return
            kept -= attachment_bytes(stored.trace)
            for step in stored.trace.steps:
                step.attachments = [replace(a, data=None) for a in step.attachments]

    async def get(self, trace_id: str) -> Trace | None:
        self._drop_expired()
        stored = self._traces.get(trace_id)
        return stored.trace if stored else None

    async def list(self, conversation: str, *, limit: int = 20) -> builtins.list[Trace]:
        self._drop_expired()
        found = [s.trace for s in reversed(self._traces.values())]
        return [t for t in found if t.conversation == conversation][:limit]

    async def recent(self, *, limit: int = 20) -> builtins.list[Trace]:
        self._drop_expired()
        found = [s.trace for s in self._traces.values()]
        return sorted(found, key=lambda t: t.started_at, reverse=True)[: max(0, limit)]

    async def last(self, conversation: str) -> Trace | None:
        recent = await self.list(conversation, limit=1)
        return recent[0] if recent else None

    async def vote(self, run_id: str, value: Literal["up", "down"], by: str) -> bool:
        # No await between the read and the write: atomic in this process.
        self._drop_expired()
        stored = self._traces.get(run_id)
        if stored is None:
            return False
        stored.trace.vote(value, by, time.time())
        return True

    def _drop_expired(self) -> None:
        now = self._clock()
        for trace_id in [k for k, v in self._traces.items() if v.expires_at <= now]:
            del self._traces[trace_id]


# ---- locks --------------------------------------------------------------------------------


@dataclass(slots=True)
class _LocalLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0
    alive_until: float = 0.0
    """The holder's lease: renewed while it runs, so only a hung holder lets it lapse."""


class InMemoryLocks:
    """One asyncio.Lock per conversation, forgotten when nobody holds or waits for it.

    A holder that hangs must not block its conversation forever: once its lease lapses
    (``lease_seconds`` after it last renewed it; a holder renews it every third of that for
    up to ``hold_at_most``), the next run goes ahead unserialised, the same outcome as an
    expired Redis lease.
    """

    def __init__(
        self,
        *,
        lease_seconds: float = DEFAULT_LOCK_LEASE,
        hold_at_most: float | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self._lease = lease_seconds
        self._hold_at_most = max(lease_seconds, hold_at_most or lease_seconds)
        """The longest a healthy holder may keep the lock by renewing it."""
        self._clock = clock
        self._locks: dict[str, _LocalLock] = {}

    @asynccontextmanager
    async def hold(
        self, conversation: str, *, on_wait: OnWait | None = None
    ) -> AsyncIterator[None]:
        entry = self._locks.setdefault(conversation, _LocalLock())
        entry.users += 1
        acquired = False
        try:
            acquired = await self._acquire(entry, on_wait)
            if not acquired:  # the holder's lease lapsed: go ahead without the lock
                yield
                return

            async def renew() -> None:
                entry.alive_until = self._clock() + self._lease

            await renew()
            async with renewing(
                renew,
                every=self._lease / 3,
                until=self._hold_at_most - self._lease,
                what=f"the lock of {conversation}",
            ):
                yield
        finally:
            if acquired:
                entry.lock.release()
            entry.users -= 1
            if entry.users == 0:
                self._locks.pop(conversation, None)

    async def _acquire(self, entry: _LocalLock, on_wait: OnWait | None) -> bool:
        if not entry.lock.locked():
            await entry.lock.acquire()
            return True
        await notify_wait(on_wait)
        while (left := entry.alive_until - self._clock()) > 0:
            try:
                async with asyncio.timeout(left):
                    await entry.lock.acquire()
                return True
            except TimeoutError:
                continue  # renewed meanwhile? look again
        return False


# ---- channel settings ---------------------------------------------------------------------


class InMemoryChannelSettings:
    """Settings in this process, for at most ``max_channels`` channels (least recently used
    forgotten first, like the in-memory history)."""

    def __init__(self, *, max_channels: int = 10_000) -> None:
        self._max = max_channels
        self._settings: OrderedDict[str, dict[str, str]] = OrderedDict()

    async def get(self, channel: str) -> dict[str, str]:
        return self.get_now(channel)

    def get_now(self, channel: str) -> dict[str, str]:
        found = self._settings.get(channel)
        if found is None:
            return {}
        self._settings.move_to_end(channel)
        return dict(found)

    async def put(self, channel: str, name: str, value: str | None) -> None:
        self.put_now(channel, name, value)

    def put_now(self, channel: str, name: str, value: str | None) -> None:
        settings = self._settings.setdefault(channel, {})
        if value is None:
            settings.pop(name, None)
        else:
            settings[name] = value
        self._settings.move_to_end(channel)
        while len(self._settings) > self._max:
            self._settings.popitem(last=False)


# ---- event claims -------------------------------------------------------------------------


class InMemoryEventClaims:
    """Remembers claimed event ids for ``ttl_seconds`` (platform retries come within
    minutes), or the TTL a claim names."""

    def __init__(
        self, *, ttl_seconds: float = DEFAULT_CLAIM_TTL, clock: Clock = time.monotonic
    ) -> None:
        self._ttl = ttl_seconds
        self._clock = clock
        self._claimed: dict[str, float] = {}
        """event id -> when its claim lapses."""
        self._lapses: list[tuple[float, str]] = []
        """A heap of (when, event id): the claims in the order they lapse (an entry whose
        claim was released or renewed meanwhile is skipped when its time comes)."""

    async def claim(self, event_id: str, *, ttl: float | None = None) -> bool:
        return self.claim_now(event_id, ttl=ttl)

    def claim_now(self, event_id: str, *, ttl: float | None = None) -> bool:
        """Synchronous claim: no await between check and set, so concurrent tasks cannot race."""
        now = self._clock()
        self._drop_expired(now)
        if event_id in self._claimed:
            return False
        self._hold(event_id, now, ttl)
        return True

    async def release(self, event_id: str) -> None:
        self.release_now(event_id)

    def release_now(self, event_id: str) -> None:
        self._claimed.pop(event_id, None)

    def _hold(self, event_id: str, now: float, ttl: float | None) -> None:
        until = now + (self._ttl if ttl is None else ttl)
        self._claimed[event_id] = until
        heapq.heappush(self._lapses, (until, event_id))

    def _drop_expired(self, now: float) -> None:
        while self._lapses and self._lapses[0][0] <= now:
            until, event_id = heapq.heappop(self._lapses)
            if self._claimed.get(event_id) == until:
                del self._claimed[event_id]


# ---- cooldowns ----------------------------------------------------------------------------


class InMemoryCooldowns:
    """Windows in this process; expired keys are dropped when the map grows past ``max_keys``."""

    def __init__(self, *, clock: Clock = time.monotonic, max_keys: int = 10_000) -> None:
        self._clock = clock
        self._max_keys = max_keys
        self._until: dict[str, float] = {}

    async def hit(self, key: str, seconds: float) -> float:
        return self.hit_now(key, seconds)

    def hit_now(self, key: str, seconds: float) -> float:
        """Synchronous hit: no await between check and set, so concurrent tasks cannot race."""
        now = self._clock()
        left = self._until.get(key, now) - now
        if left > 0:
            return left
        self._until.pop(key, None)
        if seconds > 0:
            self._until[key] = now + seconds
            if len(self._until) > self._max_keys:
                self._until = {k: t for k, t in self._until.items() if t > now}
        return 0.0


async def record_vote(
    traces: TraceStore, run_id: str, value: Literal["up", "down"], by: str
) -> bool:
    """``TraceStore.vote`` by its earlier name, until its callers say ``traces.vote``."""
    return await traces.vote(run_id, value, by)


class InMemoryRunRegistry:
    """``RunRegistry`` for one process (nothing survives it, so nothing is ever orphaned
    but by a test)."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], tuple[RunRecord, float]] = {}
        self._steps: dict[tuple[str, str], list[str]] = {}

    async def beat(self, records: Sequence[RunRecord], *, at: float) -> None:
        for record in records:
            self._records[(record.surface, record.run_id)] = (record, at)
            self._steps.pop((record.surface, record.run_id), None)

    async def update(
        self,
        surface: str,
        run_id: str,
        *,
        steps: Sequence[str] = (),
        record: RunRecord | None = None,
        at: float,
    ) -> bool:
        key = (surface, run_id)
        held = self._records.get(key)
        if held is None:
            return False
        self._records[key] = (record or held[0], at)
        if steps:
            self._steps.setdefault(key, []).extend(steps)
        return True

    async def end(self, surface: str, run_id: str) -> None:
        self._records.pop((surface, run_id), None)
        self._steps.pop((surface, run_id), None)

    async def orphans(self, surface: str, *, silent_since: float, limit: int = 20) -> list[str]:
        found = [
            run for (s, run), (_, at) in self._records.items() if s == surface and at < silent_since
        ]
        return found[:limit]

    async def claim(self, surface: str, run_id: str) -> RunRecord | None:
        taken = self._records.pop((surface, run_id), None)
        steps = self._steps.pop((surface, run_id), [])
        if taken is None:
            return None
        return replace(taken[0], trace=with_steps(taken[0].trace, steps)) if steps else taken[0]

    async def running(self, surface: str, run_id: str) -> bool:
        return (surface, run_id) in self._records

    async def get(self, surface: str, run_id: str) -> RunRecord | None:
        found = self._records.get((surface, run_id))
        return found[0] if found is not None else None

    record = get

    async def count(self, surface: str) -> int:
        return sum(1 for s, _ in self._records if s == surface)


# ---- run slots ----------------------------------------------------------------------------


class InMemoryRunSlots:
    """Slots in this process; ``take_now`` has no await between check and reserve."""

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._held: dict[str, dict[str, float]] = {}

    async def take(self, key: str, slot: str, *, limit: int, lease: float) -> bool:
        return self.take_now(key, slot, limit=limit, lease=lease)

    def take_now(self, key: str, slot: str, *, limit: int, lease: float) -> bool:
        now = self._clock()
        held = {s: until for s, until in self._held.get(key, {}).items() if until > now}
        self._held[key] = held
        if slot not in held and len(held) >= limit:
            return False
        held[slot] = now + lease
        return True

    def hold_now(self, key: str, slot: str, *, lease: float) -> None:
        """Record a slot granted elsewhere (the shared store), without checking the limit."""
        self._held.setdefault(key, {})[slot] = self._clock() + lease

    async def give_back(self, key: str, slot: str) -> None:
        self.give_back_now(key, slot)

    def give_back_now(self, key: str, slot: str) -> None:
        held = self._held.get(key)
        if held is not None:
            held.pop(slot, None)
            if not held:
                del self._held[key]


# ---- stop requests ------------------------------------------------------------------------


class InMemoryStopRequests:
    """Requests go straight to this process's subscribers (one process: nobody else to tell)."""

    def __init__(self) -> None:
        self._handlers: list[StopHandler] = []

    async def request(self, run_id: str, *, by: str, by_id: str = "") -> None:
        self.dispatch(run_id, by, by_id)

    def dispatch(self, run_id: str, by: str, by_id: str = "") -> None:
        for handler in list(self._handlers):
            deliver(handler, run_id, by, by_id)

    @asynccontextmanager
    async def subscribe(self, handler: StopHandler) -> AsyncIterator[None]:
        self._handlers.append(handler)
        try:
            yield
        finally:
            self._handlers.remove(handler)


# ---- approvals ----------------------------------------------------------------------------


class InMemoryDecisions:
    """Decisions go straight to this process's subscribers."""

    def __init__(self) -> None:
        self._handlers: list[DecisionHandler] = []

    async def publish(self, key: RequestKey, decision: Decision) -> None:
        self.dispatch(key, decision)

    def dispatch(self, key: RequestKey, decision: Decision) -> None:
        for handler in list(self._handlers):
            try:
                handler(key, decision)
            except Exception:
                log.exception("a decision handler failed for %s", key)

    @asynccontextmanager
    async def subscribe(self, handler: DecisionHandler) -> AsyncIterator[None]:
        self._handlers.append(handler)
        try:
            yield
        finally:
            self._handlers.remove(handler)


class InMemoryAllowances:
    """Allowances in this process, for at most ``max_conversations`` (least recently used go)."""

    def __init__(self, *, max_conversations: int = 10_000) -> None:
        self._max = max_conversations
        self._allowed: OrderedDict[str, dict[str, str]] = OrderedDict()

    async def allowed(self, conversation: str, tool: str) -> str | None:
        return self.allowed_now(conversation, tool)

    def allowed_now(self, conversation: str, tool: str) -> str | None:
        tools = self._allowed.get(conversation)
        return tools.get(tool.lower()) if tools else None

    async def allow(self, conversation: str, tool: str, *, by: str) -> None:
        self.allow_now(conversation, tool, by=by)

    def allow_now(self, conversation: str, tool: str, *, by: str) -> None:
        self._allowed.setdefault(conversation, {})[tool.lower()] = by
        self._allowed.move_to_end(conversation)
        while len(self._allowed) > self._max:
            self._allowed.popitem(last=False)


class InMemoryPending:
    def __init__(self) -> None:
        self._requests: dict[RequestKey, ApprovalRequest] = {}

    async def put(self, request: ApprovalRequest) -> None:
        self._requests[key_of(request)] = request

    async def get(self, key: RequestKey) -> ApprovalRequest | None:
        return self._requests.get(key)

    async def drop(self, key: RequestKey) -> None:
        self._requests.pop(key, None)


# ---- token usage --------------------------------------------------------------------------


class InMemoryUsageCounters:
    """``UsageCounters`` of one process (no Redis); no await inside a step, so each is atomic."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._counts: dict[str, tuple[int, float]] = {}
        self._holds: dict[str, dict[str, tuple[int, float]]] = {}
        """counter -> run -> (amount, until)."""
        self._clock = clock

    async def add(self, key: str, amount: int, *, expire_at: float) -> int:
        now = self._clock()
        self._counts = {k: v for k, v in self._counts.items() if v[1] > now}  # days gone
        count = self._counts.get(key, (0, expire_at))[0] + amount
        self._counts[key] = (count, expire_at)
        return count

    async def get(self, keys: Sequence[str]) -> list[int]:
        return self._now(keys)

    def _now(self, keys: Sequence[str]) -> list[int]:
        now = self._clock()
        found = [self._counts.get(key) for key in keys]
        return [entry[0] if entry is not None and entry[1] > now else 0 for entry in found]

    def _held(self, counter: str, *, but: str, now: float) -> int:
        holds = self._holds.get(counter, {})
        return sum(amount for run, (amount, until) in holds.items() if run != but and until > now)

    def _drop_expired(self, now: float) -> None:
        for counter, holds in list(self._holds.items()):
            live = {run: hold for run, hold in holds.items() if hold[1] > now}
            if live:
                self._holds[counter] = live
            else:
                del self._holds[counter]

    async def hold(
        self, run: str, lines: Sequence[Line], *, lease: float, expire_at: float
    ) -> list[Standing] | None:
        now = self._clock()
        self._drop_expired(now)
        used = self._now([line.counter for line in lines])
        stood = [
            Standing(count, self._held(line.counter, but=run, now=now))
            for line, count in zip(lines, used, strict=True)
        ]
        if any(s.used + s.held >= line.limit for line, s in zip(lines, stood, strict=True)):
            return up_to_refusal(lines, stood)
        for line, s in zip(lines, stood, strict=True):
            amount = min(line.estimate, line.limit - s.used - s.held)
            self._holds.setdefault(line.counter, {})[run] = (amount, now + lease)
        return None

    async def renew(self, run: str, counters: Sequence[str], *, lease: float) -> None:
        now = self._clock()
        for counter in counters:
            holds = self._holds.get(counter, {})
            if run in holds and holds[run][1] > now:
                holds[run] = (holds[run][0], now + lease)

    async def settle(
        self, run: str, counters: Sequence[str], amounts: Sequence[int], *, expire_at: float
    ) -> None:
        for counter, amount in zip(counters, amounts, strict=True):
            if amount > 0:
                await self.add(counter, amount, expire_at=expire_at)
            holds = self._holds.get(counter, {})
            holds.pop(run, None)
            if not holds:
                self._holds.pop(counter, None)


# ---- files ----------------------------------------------------------------------------------


class InMemoryFileStore:
    """Passages per conversation in this process, for at most ``max_conversations``
    conversations (the least recently used forgotten first)."""

    def __init__(self, *, max_conversations: int = 1000) -> None:
        self._max = max_conversations
        self._data: OrderedDict[str, list[Passage]] = OrderedDict()

    async def load(self, conversation: str) -> list[Passage]:
        passages = self._data.get(conversation)
        if passages is None:
            return []
        self._data.move_to_end(conversation)
        return list(passages)

    async def add(self, conversation: str, passages: Sequence[Passage]) -> None:
        if not passages:
            return
        self._data.setdefault(conversation, []).extend(passages)
        self._data.move_to_end(conversation)
        while len(self._data) > self._max:
            self._data.popitem(last=False)

    async def clear(self, conversation: str) -> None:
        self._data.pop(conversation, None)

    def __len__(self) -> int:
        return len(self._data)


# ---- the search cache -----------------------------------------------------------------------


class InMemorySearchCache:
    """A per-process cache with a TTL per entry and a bound on the number of entries (LRU)."""

    def __init__(
        self, *, max_entries: int = 256, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, ToolResult]] = OrderedDict()

    async def get(self, key: str) -> ToolResult | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires_at, value = entry
        if expires_at <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    async def set(self, key: str, value: ToolResult, ttl: float) -> None:
        if ttl <= 0:
            return
        self._entries[key] = (self._clock() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
