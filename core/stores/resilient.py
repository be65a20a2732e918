"""Keep answering when the shared store is gone: wrappers that degrade instead of failing.

When the wrapped store raises ``StoreUnavailable`` the run goes on without memory: history
loads as empty and writes are dropped, traces, event claims and cooldowns fall back to this
process, conversation locks are always taken in-process too, so one process stays
serialised, and stop requests always reach this process's own runs.

After a failure the real store is left alone for ``retry_after`` seconds (default 5), so a
hung server costs one timeout per turn rather than one per call; the first call after that
tries it again, and a restarted server is used as soon as it answers (reconnecting is the
redis client's job). ``retry_after=0`` retries on every call.

``StoreHealth`` records which conversations lost memory, so the agent can say
"memory unavailable" once in that reply (``take_notice``), and logs each outage once, with
the server's address, when it begins and when the server answers again.

A full store (``StoreFull``: Redis refused a write, OOM) is not an outage: it answers, reads
work, and an event claim must still be checked there, so it is not left alone afterwards.
Each refusal is counted (``out_of_memory``), its conversation goes without memory and gets
the notice, and the log says so at most once every ``FULL_LOG_EVERY`` seconds.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeVar

from core.errors import StoreFull, StoreUnavailable
from core.llm import Message
from core.memories import Holder, Memory, MemoryStore
from core.stores.memory import (
    InMemoryAllowances,
    InMemoryChannelSettings,
    InMemoryCooldowns,
    InMemoryDecisions,
    InMemoryEventClaims,
    InMemoryLocks,
    InMemoryPending,
    InMemoryRunSlots,
    InMemoryStopRequests,
    InMemoryTraceStore,
)
from core.stores.protocols import (
    Allowances,
    ChannelSettings,
    Clock,
    ConversationLocks,
    Cooldowns,
    DecisionChannel,
    EventClaims,
    FileStore,
    HistoryStore,
    OnWait,
    PendingRequests,
    ReplaceableHistory,
    RunRegistry,
    RunSlots,
    StopHandler,
    StopRequests,
    TraceStore,
    UsageCounters,
)
from core.stores.records import (
    ApprovalRequest,
    Decision,
    DecisionHandler,
    Line,
    RequestKey,
    RunRecord,
    Standing,
)
from core.stores.waiting import notify_wait
from core.trace import Trace

if TYPE_CHECKING:
    from core.tools.lookup import Passage

T = TypeVar("T")

log = logging.getLogger("core.resilient")
"""Named as before the move: operators' filters and ``bot.cli`` (which quiets it) know it so."""

MEMORY_UNAVAILABLE = "memory unavailable"
"""The notice text for a reply that ran without the shared store."""

DEFAULT_RETRY_AFTER = 5.0
FULL_LOG_EVERY = 60.0
"""Seconds between two log lines about a full store (it may refuse every write for hours)."""

OnUnavailable = Callable[[str | None, StoreUnavailable], None]


class StoreHealth:
    """Shared by the wrappers: calls the real store, remembers failures and who they hit."""

    def __init__(
        self,
        *,
        retry_after: float = DEFAULT_RETRY_AFTER,
        on_unavailable: OnUnavailable | None = None,
        clock: Clock = time.monotonic,
        name: str = "the shared store",
    ) -> None:
        self.name = name
        """Says which server, for the log (``Redis at host:port/db``; never credentials)."""
        self._retry_after = retry_after
        self._on_unavailable = on_unavailable
        self._clock = clock
        self._retry_at = 0.0
        self._pending: set[str] = set()
        self.degraded = False
        self.last_error: StoreUnavailable | None = None
        self.failures = 0
        """Calls the store failed (not those skipped while it is presumed down): metrics."""
        self.out_of_memory = 0
        """Writes the store refused for want of memory (``StoreFull``), of ``failures``."""
        self._full_logged_at: float | None = None

    async def call(self, conversation: str | None, action: Callable[[], Awaitable[T]]) -> T:
        """Run ``action`` on the real store, or raise ``StoreUnavailable`` (recorded).

        ``conversation`` is None for calls not tied to one (event claims).
        """
        if self._clock() < self._retry_at:
            self._note(conversation)
            raise StoreUnavailable("the store failed moments ago; not retried yet")
        try:
            result = await action()
        except StoreFull as exc:
            self._full(conversation, exc)
            raise
        except StoreUnavailable as exc:
            self._failed(conversation, exc)
            raise
        if self.degraded:
            log.warning("%s answers again: memory and shared state are back", self.name)
        self.degraded = False
        return result

    def take_notice(self, conversation: str) -> bool:
        """True once after the store failed for ``conversation``: emit the notice then."""
        if conversation in self._pending:
            self._pending.discard(conversation)
            return True
        return False

    def _failed(self, conversation: str | None, exc: StoreUnavailable) -> None:
        self.failures += 1
        if not self.degraded:  # once per outage, not once per call
            log.warning(
                "%s is unavailable (%s): answering without memory, shared state kept in "
                "this process until it is back",
                self.name,
                exc,
            )
        self.degraded = True
        self.last_error = exc
        self._retry_at = self._clock() + self._retry_after
        self._note(conversation)
        if self._on_unavailable is not None:
            self._on_unavailable(conversation, exc)

    def _full(self, conversation: str | None, exc: StoreFull) -> None:
        self.failures += 1
        self.out_of_memory += 1
        self.last_error = exc
        now = self._clock()
        if self._full_logged_at is None or now - self._full_logged_at >= FULL_LOG_EVERY:
            self._full_logged_at = now
            log.warning(
                "%s is full and refuses writes (%s): answering without memory; give it more "
                "maxmemory or lower redis.max_traces (%d refused so far)",
                self.name,
                exc,
                self.out_of_memory,
            )
        self._note(conversation)
        if self._on_unavailable is not None:
            self._on_unavailable(conversation, exc)

    def _note(self, conversation: str | None) -> None:
        if conversation is not None:
            self._pending.add(conversation)


class ResilientHistory:
    """A ``HistoryStore`` that never raises ``StoreUnavailable``: it forgets instead."""

    def __init__(self, inner: HistoryStore, *, health: StoreHealth | None = None) -> None:
        self.inner = inner
        self.health = health or StoreHealth()

    @property
    def degraded(self) -> bool:
        return self.health.degraded

    async def load(self, conversation: str) -> list[Message]:
        try:
            return await self.health.call(conversation, lambda: self.inner.load(conversation))
        except StoreUnavailable:
            return []

    async def append(self, conversation: str, *messages: Message) -> None:
        # Dropped when the store is down: the answer matters more than remembering it.
        with suppress(StoreUnavailable):
            await self.health.call(conversation, lambda: self.inner.append(conversation, *messages))

    async def replace(self, conversation: str, messages: Sequence[Message]) -> None:
        with suppress(StoreUnavailable):
            await self.health.call(conversation, lambda: self._replace(conversation, messages))

    async def clear(self, conversation: str) -> None:
        with suppress(StoreUnavailable):
            await self.health.call(conversation, lambda: self.inner.clear(conversation))

    async def _replace(self, conversation: str, messages: Sequence[Message]) -> None:
        if isinstance(self.inner, ReplaceableHistory):
            await self.inner.replace(conversation, messages)
        else:
            await self.inner.clear(conversation)
            await self.inner.append(conversation, *messages)


class ResilientTraceStore:
    """Saves to the shared store, or to this process when it is down; reads likewise."""

    def __init__(
        self,
        inner: TraceStore,
        *,
        health: StoreHealth | None = None,
        fallback: InMemoryTraceStore | None = None,
    ) -> None:
        self.inner = inner
        self.health = health or StoreHealth()
        self.fallback = fallback or InMemoryTraceStore()

    async def save(self, trace: Trace) -> None:
        try:
            await self.health.call(trace.conversation, lambda: self.inner.save(trace))
        except StoreUnavailable:
            await self.fallback.save(trace)

    async def get(self, trace_id: str) -> Trace | None:
        try:
            found = await self.health.call(None, lambda: self.inner.get(trace_id))
        except StoreUnavailable:
            found = None
        return found or await self.fallback.get(trace_id)

    async def list(self, conversation: str, *, limit: int = 20) -> builtins.list[Trace]:
        try:
            found = await self.health.call(None, lambda: self.inner.list(conversation, limit=limit))
        except StoreUnavailable:
            found = []
        local = await self.fallback.list(conversation, limit=limit)
        return _newest_first(found, local)[:limit]

    async def recent(self, *, limit: int = 20) -> builtins.list[Trace]:
        try:
            found = await self.health.call(None, lambda: self.inner.recent(limit=limit))
        except StoreUnavailable:
            found = []
        local = await self.fallback.recent(limit=limit)
        return _newest_first(found, local)[: max(0, limit)]

    async def last(self, conversation: str) -> Trace | None:
        recent = await self.list(conversation, limit=1)
        return recent[0] if recent else None

    async def vote(self, run_id: str, value: Literal["up", "down"], by: str) -> bool:
        """On the shared store's trace, or on this process's when that one is not there (it
        was saved while the store was down, or the store is down now)."""
        try:
            if await self.health.call(None, lambda: self.inner.vote(run_id, value, by)):
                return True
        except StoreUnavailable:
            pass
        return await self.fallback.vote(run_id, value, by)


def _newest_first(*groups: builtins.list[Trace]) -> builtins.list[Trace]:
    merged = {t.id: t for group in groups for t in group}
    return sorted(merged.values(), key=lambda t: t.started_at, reverse=True)


class ResilientLocks:
    """Always an in-process lock, plus the shared lock while the store answers.

    The local lock keeps this process serialised even when Redis dies mid-run; the shared
    one serialises across processes. ``on_wait`` is called at most once per hold.
    """

    def __init__(
        self,
        inner: ConversationLocks,
        *,
        health: StoreHealth | None = None,
        local: InMemoryLocks | None = None,
    ) -> None:
        self.inner = inner
        self.health = health or StoreHealth()
        self.local = local or InMemoryLocks()

    @asynccontextmanager
    async def hold(
        self, conversation: str, *, on_wait: OnWait | None = None
    ) -> AsyncIterator[None]:
        once = _Once(on_wait)
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self.local.hold(conversation, on_wait=once))
            shared = self.inner.hold(conversation, on_wait=once)
            # Without the shared lock, this process stays serialised by the local one.
            with suppress(StoreUnavailable):
                await self.health.call(conversation, lambda: stack.enter_async_context(shared))
            yield


@dataclass(slots=True)
class _Once:
    callback: OnWait | None
    called: bool = field(default=False)

    async def __call__(self) -> None:
        if not self.called:
            self.called = True
            await notify_wait(self.callback)


class ResilientEventClaims:
    """Claims in the shared store, remembered locally so a fallback still knows them.

    A full store still says whether an event was claimed before (the Redis claim reads the
    key when its write is refused): a redelivered event is refused then, not answered twice.
    A new event it cannot record is answered, claimed in this process only."""

    def __init__(
        self,
        inner: EventClaims,
        *,
        health: StoreHealth | None = None,
        local: InMemoryEventClaims | None = None,
    ) -> None:
        self.inner = inner
        self.health = health or StoreHealth()
        self.local = local or InMemoryEventClaims()

    async def claim(self, event_id: str, *, ttl: float | None = None) -> bool:
        if not self.local.claim_now(event_id, ttl=ttl):
            return False  # this process has seen it: no need to ask Redis
        try:
            return await self.health.call(None, lambda: self.inner.claim(event_id, ttl=ttl))
        except StoreUnavailable:
            return True  # claimed locally above: the best this process can do

    async def release(self, event_id: str) -> None:
        """Released here at once; in the shared store when it answers (else its claim lapses
        with its TTL, and until then the event stays claimed for other processes)."""
        self.local.release_now(event_id)
        with suppress(StoreUnavailable):
            await self.health.call(None, lambda: self.inner.release(event_id))


class ResilientCooldowns:
    """Windows in the shared store, or in this process while it is down.

    Windows Redis grants are also started locally, so a user who just asked is still
    spaced out by this process when Redis dies mid-window.
    """

    def __init__(
        self,
        inner: Cooldowns,
        *,
        health: StoreHealth | None = None,
        local: InMemoryCooldowns | None = None,
    ) -> None:
        self.inner = inner
        self.health = health or StoreHealth()
        self.local = local or InMemoryCooldowns()

    async def hit(self, key: str, seconds: float) -> float:
        try:
            left = await self.health.call(None, lambda: self.inner.hit(key, seconds))
        except StoreUnavailable:
            return self.local.hit_now(key, seconds)
        if left == 0.0:
            self.local.hit_now(key, seconds)
        return left


class ResilientChannelSettings:
    """Settings from the shared store, remembered here: while it is down a channel keeps the
    settings last read (or the defaults), and a change is refused (``StoreUnavailable``) so
    the admin knows it was not saved."""

    def __init__(self, inner: ChannelSettings, *, health: StoreHealth | None = None) -> None:
        self.inner = inner
        self.health = health or StoreHealth()
        self.local = InMemoryChannelSettings()

    async def get(self, channel: str) -> dict[str, str]:
        try:
            found = await self.health.call(None, lambda: self.inner.get(channel))
        except StoreUnavailable:
            return self.local.get_now(channel)
        for name in set(self.local.get_now(channel)) - set(found):
            self.local.put_now(channel, name, None)
        for name, value in found.items():
            self.local.put_now(channel, name, value)
        return found

    async def put(self, channel: str, name: str, value: str | None) -> None:
        await self.health.call(None, lambda: self.inner.put(channel, name, value))
        self.local.put_now(channel, name, value)


class ResilientRunSlots:
    """Slots in the shared store, or in this process while it is down.

    A slot the shared store granted is held locally too, so when Redis dies mid-run this
    process still counts it (and gives it back in both places).
    """

    def __init__(
        self,
        inner: RunSlots,
        *,
        health: StoreHealth | None = None,
        local: InMemoryRunSlots | None = None,
    ) -> None:
        self.inner = inner
        self.health = health or StoreHealth()
        self.local = local or InMemoryRunSlots()

    async def take(self, key: str, slot: str, *, limit: int, lease: float) -> bool:
        try:
            taken = await self.health.call(
                None, lambda: self.inner.take(key, slot, limit=limit, lease=lease)
            )
        except StoreUnavailable:
            return self.local.take_now(key, slot, limit=limit, lease=lease)
        if taken:
            self.local.hold_now(key, slot, lease=lease)
        return taken

    async def give_back(self, key: str, slot: str) -> None:
        self.local.give_back_now(key, slot)
        with suppress(StoreUnavailable):
            await self.health.call(None, lambda: self.inner.give_back(key, slot))


class ResilientRunRegistry:
    """The runs in flight in the shared store; while it is down, heartbeats are skipped
    (nothing can be recovered then anyway) and no run is found orphaned. A run whose
    registration was missed is still stopped and finished by its own process."""

    def __init__(self, inner: RunRegistry, *, health: StoreHealth | None = None) -> None:
        self.inner = inner
        self.health = health or StoreHealth()

    async def beat(self, records: Sequence[RunRecord], *, at: float) -> None:
        with suppress(StoreUnavailable):
            await self.health.call(None, lambda: self.inner.beat(records, at=at))

    async def update(
        self,
        surface: str,
        run_id: str,
        *,
        steps: Sequence[str] = (),
        record: RunRecord | None = None,
        at: float,
    ) -> bool:
        """False while the store is down too: the caller writes the run whole once it is
        back, so no step is lost in the gap."""
        try:
            return await self.health.call(
                None,
                lambda: self.inner.update(surface, run_id, steps=steps, record=record, at=at),
            )
        except StoreUnavailable:
            return False

    async def end(self, surface: str, run_id: str) -> None:
        with suppress(StoreUnavailable):
            await self.health.call(None, lambda: self.inner.end(surface, run_id))

    async def orphans(self, surface: str, *, silent_since: float, limit: int = 20) -> list[str]:
        try:
            return await self.health.call(
                None, lambda: self.inner.orphans(surface, silent_since=silent_since, limit=limit)
            )
        except StoreUnavailable:
            return []

    async def claim(self, surface: str, run_id: str) -> RunRecord | None:
        try:
            return await self.health.call(None, lambda: self.inner.claim(surface, run_id))
        except StoreUnavailable:
            return None

    async def running(self, surface: str, run_id: str) -> bool:
        try:
            return await self.health.call(None, lambda: self.inner.running(surface, run_id))
        except StoreUnavailable:
            return True  # unknown: never tell a person a live run has ended

    async def get(self, surface: str, run_id: str) -> RunRecord | None:
        try:
            return await self.health.call(None, lambda: self.inner.get(surface, run_id))
        except StoreUnavailable:
            return None  # unknown: nobody may decide about a run nobody can vouch for

    record = get

    async def count(self, surface: str) -> int:
        try:
            return await self.health.call(None, lambda: self.inner.count(surface))
        except StoreUnavailable:
            return 0  # unknown: each process reserves for its own runs, as without Redis


class ResilientStopRequests:
    """Published through the shared store; while it is down, delivered in this process only.

    Subscribers listen both locally and on the shared store; a request published while the
    store answers comes back through the store alone, so each is heard once.
    """

    def __init__(
        self,
        inner: StopRequests,
        *,
        health: StoreHealth | None = None,
        local: InMemoryStopRequests | None = None,
    ) -> None:
        self.inner = inner
        self.health = health or StoreHealth()
        self.local = local or InMemoryStopRequests()

    async def request(self, run_id: str, *, by: str, by_id: str = "") -> None:
        try:
            await self.health.call(None, lambda: self.inner.request(run_id, by=by, by_id=by_id))
        except StoreUnavailable:
            await self.local.request(run_id, by=by, by_id=by_id)

    @asynccontextmanager
    async def subscribe(self, handler: StopHandler) -> AsyncIterator[None]:
        async with self.local.subscribe(handler), self.inner.subscribe(handler):
            yield


class ResilientDecisions:
    """Approval decisions through the shared store; while it is down, to this process only."""

    def __init__(
        self,
        inner: DecisionChannel,
        *,
        health: StoreHealth | None = None,
        local: InMemoryDecisions | None = None,
    ) -> None:
        self.inner = inner
        self.health = health or StoreHealth()
        self.local = local or InMemoryDecisions()

    async def publish(self, key: RequestKey, decision: Decision) -> None:
        try:
            await self.health.call(None, lambda: self.inner.publish(key, decision))
        except StoreUnavailable:
            await self.local.publish(key, decision)

    @asynccontextmanager
    async def subscribe(self, handler: DecisionHandler) -> AsyncIterator[None]:
        async with self.local.subscribe(handler), self.inner.subscribe(handler):
            yield


class ResilientPending:
    """Pending requests in the shared store, and always in this process too."""

    def __init__(self, inner: PendingRequests, *, health: StoreHealth | None = None) -> None:
        self.inner = inner
        self.health = health or StoreHealth()
        self.local = InMemoryPending()

    async def put(self, request: ApprovalRequest) -> None:
        await self.local.put(request)
        with suppress(StoreUnavailable):
            await self.health.call(None, lambda: self.inner.put(request))

    async def get(self, key: RequestKey) -> ApprovalRequest | None:
        found = await self.local.get(key)
        if found is not None:
            return found
        try:
            return await self.health.call(None, lambda: self.inner.get(key))
        except StoreUnavailable:
            return None

    async def drop(self, key: RequestKey) -> None:
        await self.local.drop(key)
        with suppress(StoreUnavailable):
            await self.health.call(None, lambda: self.inner.drop(key))


class ResilientAllowances:
    """Allowances in the shared store, kept in this process too for when it is down."""

    def __init__(
        self,
        inner: Allowances,
        *,
        health: StoreHealth | None = None,
        local: InMemoryAllowances | None = None,
    ) -> None:
        self.inner = inner
        self.health = health or StoreHealth()
        self.local = local or InMemoryAllowances()

    async def allowed(self, conversation: str, tool: str) -> str | None:
        try:
            by = await self.health.call(
                conversation, lambda: self.inner.allowed(conversation, tool)
            )
        except StoreUnavailable:
            return self.local.allowed_now(conversation, tool)
        return by

    async def allow(self, conversation: str, tool: str, *, by: str) -> None:
        self.local.allow_now(conversation, tool, by=by)
        with suppress(StoreUnavailable):
            await self.health.call(
                conversation, lambda: self.inner.allow(conversation, tool, by=by)
            )


class CheckedUsageCounters:
    """Token counters in the shared store, through its ``StoreHealth``: a failure counts and
    is logged with the other stores', and while the store is presumed down a call fails at
    once with ``StoreUnavailable`` (which ``TokenBudgets`` handles) instead of waiting out
    another timeout."""

    def __init__(self, inner: UsageCounters, *, health: StoreHealth) -> None:
        self.inner = inner
        self.health = health

    async def add(self, key: str, amount: int, *, expire_at: float) -> int:
        return await self.health.call(
            None, lambda: self.inner.add(key, amount, expire_at=expire_at)
        )

    async def get(self, keys: Sequence[str]) -> builtins.list[int]:
        return await self.health.call(None, lambda: self.inner.get(keys))

    async def hold(
        self, run: str, lines: Sequence[Line], *, lease: float, expire_at: float
    ) -> builtins.list[Standing] | None:
        """A hold the store cannot take fails here, and the question goes on unheld (a
        budget outage must not take the bot down); the other holds keep their leases."""
        return await self.health.call(
            None, lambda: self.inner.hold(run, lines, lease=lease, expire_at=expire_at)
        )

    async def renew(self, run: str, counters: Sequence[str], *, lease: float) -> None:
        await self.health.call(None, lambda: self.inner.renew(run, counters, lease=lease))

    async def settle(
        self, run: str, counters: Sequence[str], amounts: Sequence[int], *, expire_at: float
    ) -> None:
        await self.health.call(
            None, lambda: self.inner.settle(run, counters, amounts, expire_at=expire_at)
        )


class CheckedFileStore:
    """A conversation's file passages in the shared store, through its ``StoreHealth`` (see
    ``CheckedUsageCounters``; ``ConversationFiles`` handles the ``StoreUnavailable``)."""

    def __init__(self, inner: FileStore, *, health: StoreHealth) -> None:
        self.inner = inner
        self.health = health

    async def load(self, conversation: str) -> builtins.list[Passage]:
        return await self.health.call(None, lambda: self.inner.load(conversation))

    async def add(self, conversation: str, passages: Sequence[Passage]) -> None:
        await self.health.call(None, lambda: self.inner.add(conversation, passages))

    async def clear(self, conversation: str) -> None:
        await self.health.call(None, lambda: self.inner.clear(conversation))


class CheckedMemories:
    """What people asked to remember, through the store's ``StoreHealth``: while it is
    presumed down a run's recall and its memory tools fail at once (said in the trace and
    to the model) instead of each waiting for a timeout."""

    def __init__(self, inner: MemoryStore, *, health: StoreHealth) -> None:
        self.inner = inner
        self.health = health

    async def add(self, memory: Memory, *, limit: int) -> Memory | None:
        return await self.health.call(None, lambda: self.inner.add(memory, limit=limit))

    async def list(self, *holders: Holder) -> builtins.list[Memory]:
        return await self.health.call(None, lambda: self.inner.list(*holders))

    async def delete(self, holder: Holder, ids: Sequence[str]) -> builtins.list[str]:
        return await self.health.call(None, lambda: self.inner.delete(holder, ids))

    async def clear(self, holder: Holder) -> int:
        return await self.health.call(None, lambda: self.inner.clear(holder))
