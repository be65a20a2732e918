"""Stores beside the history: traces, conversation locks, event claims, cooldowns, stops
and run slots (how many runs one user has in flight).

Each is a small protocol with an in-process implementation here (the embedded default);
``core.redis_store`` implements the same protocols on Redis for many processes sharing one
server, and ``core.resilient`` keeps the bot answering when that server is gone.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import json
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Literal, Protocol, runtime_checkable

from core.history import Message
from core.trace import Trace, attachment_bytes

OnWait = Callable[[], Awaitable[None] | None]
"""Called once when a run has to wait for the previous one in its conversation."""

Clock = Callable[[], float]

StopHandler = Callable[[str, str, str], None]
"""Told ``(run_id, by, by_id)``: by whom a run is to be stopped (their id beside, or "")."""
"""Called with ``(run_id, by)`` for each stop request heard; must not block."""

log = logging.getLogger(__name__)

DEFAULT_TRACE_TTL = 30 * 24 * 3600
DEFAULT_LOCK_LEASE = 180.0
DEFAULT_CLAIM_TTL = 900


class TraceStore(Protocol):
    async def save(self, trace: Trace) -> None: ...

    async def get(self, trace_id: str) -> Trace | None: ...

    async def list(self, conversation: str, *, limit: int = 20) -> builtins.list[Trace]:
        """The conversation's most recent traces, newest first."""
        ...

    async def recent(self, *, limit: int = 20) -> builtins.list[Trace]:
        """The most recent traces of every conversation, newest first."""
        ...

    async def last(self, conversation: str) -> Trace | None: ...


_VOTING: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()


async def record_vote(
    traces: TraceStore, run_id: str, value: Literal["up", "down"], by: str
) -> bool:
    """``by``'s 👍 or 👎 on the answer of run ``run_id``, kept on its stored trace (replacing
    their earlier vote); False when the trace is no longer stored. Votes on one trace in this
    process take turns, so none overwrites another; two replicas voting on one answer in the
    same instant can still lose one of the two (the trace is read, then written whole)."""
    lock = _VOTING.get(run_id)
    if lock is None:
        lock = _VOTING[run_id] = asyncio.Lock()
    async with lock:
        trace = await traces.get(run_id)
        if trace is None:
            return False
        trace.vote(value, by, time.time())
        await traces.save(trace)
    return True


class ConversationLocks(Protocol):
    def hold(
        self, conversation: str, *, on_wait: OnWait | None = None
    ) -> AbstractAsyncContextManager[None]:
        """Serialise runs in ``conversation``; ``on_wait`` is called once if this one waits."""
        ...


class EventClaims(Protocol):
    async def claim(self, event_id: str) -> bool:
        """True for the first claim of ``event_id`` (within the claim TTL), False after."""
        ...


class Cooldowns(Protocol):
    async def hit(self, key: str, seconds: float) -> float:
        """0.0 when ``key`` is free, and a window of ``seconds`` starts; otherwise the
        seconds left in the current window (which is not extended)."""
        ...


class StopRequests(Protocol):
    """ "Stop run R", asked by any process, heard by the process that runs R.

    Permission is checked where the click arrives; a request names who asked, and a
    subscriber cancels the named run if it is one of its own (and ignores it otherwise).
    """

    async def request(self, run_id: str, *, by: str, by_id: str = "") -> None: ...

    def subscribe(self, handler: StopHandler) -> AbstractAsyncContextManager[None]:
        """Call ``handler`` for every request while the context is open."""
        ...


class ChannelSettings(Protocol):
    """What an admin set for one channel (``verbosity``; later model, persona, tools): short
    strings by name, shared by every process. Unset names take the platform's default."""

    async def get(self, channel: str) -> dict[str, str]: ...

    async def put(self, channel: str, name: str, value: str | None) -> None:
        """Set ``name``, or remove it (back to the default) with None."""
        ...


class RunSlots(Protocol):
    """At most ``limit`` runs in flight per key (a user), counted across every process.

    ``take`` checks and reserves in one atomic step, so concurrent questions cannot all slip
    past the check; a slot is given back when its run ends, or expires after ``lease``
    seconds (a process that died mid-run must not block its users forever).
    """

    async def take(self, key: str, slot: str, *, limit: int, lease: float) -> bool: ...

    async def give_back(self, key: str, slot: str) -> None: ...


@runtime_checkable
class ReplaceableHistory(Protocol):
    """A history store that can swap a conversation's messages at once (used for summaries)."""

    async def replace(self, conversation: str, messages: Sequence[Message]) -> None: ...


async def notify_wait(on_wait: OnWait | None) -> None:
    """Call a sync or async ``on_wait`` callback."""
    if on_wait is None:
        return
    result = on_wait()
    if inspect.isawaitable(result):
        await result


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
    """Remembers claimed event ids for ``ttl_seconds`` (platform retries come within minutes)."""

    def __init__(
        self, *, ttl_seconds: float = DEFAULT_CLAIM_TTL, clock: Clock = time.monotonic
    ) -> None:
        self._ttl = ttl_seconds
        self._clock = clock
        self._claimed: OrderedDict[str, float] = OrderedDict()

    async def claim(self, event_id: str) -> bool:
        return self.claim_now(event_id)

    def claim_now(self, event_id: str) -> bool:
        """Synchronous claim: no await between check and set, so concurrent tasks cannot race."""
        now = self._clock()
        self._drop_expired(now)
        if event_id in self._claimed:
            return False
        self._claimed[event_id] = now + self._ttl
        return True

    def remember(self, event_id: str) -> None:
        """Record a claim made elsewhere (e.g. in Redis) so a later fallback still knows it."""
        now = self._clock()
        self._drop_expired(now)
        self._claimed.pop(event_id, None)  # re-insert at the end to keep expiry order
        self._claimed[event_id] = now + self._ttl

    def _drop_expired(self, now: float) -> None:
        # Insertion order is expiry order (constant TTL), so expired ids are at the front.
        while self._claimed:
            first_id, expires_at = next(iter(self._claimed.items()))
            if expires_at > now:
                break
            del self._claimed[first_id]


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


# ---- runs in flight, for crash recovery -----------------------------------------------------

TRACE_SNAPSHOT_CHARS = 256 * 1024
"""A run's record carries its trace so far up to this size: the head (the trace without its
steps) and then its finished steps, as long as they fit (the first ones are kept)."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One answer being written, as every process can read it: who runs it (``owner``, one
    id per process), where its message is (``where``, the platform's reference), and its
    trace as of the last heartbeat, so a live process can finish it if the owner dies."""

    run_id: str
    surface: str
    conversation: str
    owner: str
    where: dict[str, str] = field(default_factory=dict)
    asker_key: str = ""
    slot: str = ""
    trace: str = ""
    """The trace's JSON as last written (``TRACE_SNAPSHOT_CHARS`` at most): its head, and
    in a claimed record every step added to it since."""
    place: str = ""
    """The channel whose budget the run spends (``core.budgets``)."""
    held: tuple[str, ...] = ()
    """The budget counters the run holds (its hold's id is ``slot``): whoever finishes the
    run settles them with what its trace spent."""
    asker: str = ""
    """The asker's id on the platform: who may stop the run or decide on its actions, at
    whichever process the press arrives (``adapters.decisions``); with ``where``, the
    run's own word on who asked and where, never a button's."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "run_id": self.run_id,
                "surface": self.surface,
                "conversation": self.conversation,
                "owner": self.owner,
                "where": self.where,
                "asker_key": self.asker_key,
                "slot": self.slot,
                "trace": self.trace,
                "place": self.place,
                "held": list(self.held),
                "asker": self.asker,
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> RunRecord | None:
        try:
            data = json.loads(text)
            return cls(
                run_id=str(data["run_id"]),
                surface=str(data["surface"]),
                conversation=str(data["conversation"]),
                owner=str(data["owner"]),
                where={str(k): str(v) for k, v in dict(data.get("where") or {}).items()},
                asker_key=str(data.get("asker_key", "")),
                slot=str(data.get("slot", "")),
                trace=str(data.get("trace", "")),
                place=str(data.get("place", "")),
                held=tuple(str(c) for c in data.get("held") or ()),
                asker=str(data.get("asker", "")),
            )
        except (ValueError, KeyError, TypeError):
            log.warning("an unreadable run record was skipped")
            return None


def trace_head(trace: Trace) -> str:
    """The trace's JSON without its steps (the question, the models, the status...), or ""
    when even that is beyond ``TRACE_SNAPSHOT_CHARS``: what a run's record holds, its steps
    being added one by one as they finish (``RunRegistry.update``)."""
    text = replace(trace, steps=[]).to_json()
    return text if len(text) <= TRACE_SNAPSHOT_CHARS else ""


def step_json(trace: Trace, index: int) -> str:
    return json.dumps(asdict(trace.steps[index]), ensure_ascii=False)


def with_steps(trace: str, steps: Sequence[str | bytes]) -> str:
    """A record's trace JSON with the steps added since it was written put at the end of its
    own; the record's as it is when a piece is unreadable (an interrupted trace keeps what
    it can)."""
    if not steps or not trace:
        return trace
    try:
        data = json.loads(trace)
        data["steps"] = [*(data.get("steps") or []), *(json.loads(step) for step in steps)]
        return json.dumps(data, ensure_ascii=False)
    except (ValueError, TypeError, AttributeError):
        log.warning("the steps a run left could not be read; its trace is kept without them")
        return trace


class RunRegistry(Protocol):
    """The answers being written, per surface, with a heartbeat each: an answer whose
    heartbeat stopped belongs to a process that died, and ``claim`` gives it to exactly one
    live process to finish."""

    async def beat(self, records: Sequence[RunRecord], *, at: float) -> None:
        """Register ``records`` (their heartbeat is ``at``), or replace them whole with the
        steps added to them."""
        ...

    async def update(
        self,
        surface: str,
        run_id: str,
        *,
        steps: Sequence[str] = (),
        record: RunRecord | None = None,
        at: float,
    ) -> bool:
        """What changed in a registered run since its last write: its heartbeat is ``at``,
        the JSON of each of ``steps`` is added to its trace, and its record is replaced by
        ``record`` when given (whose ``trace`` is a head: steps added stay). A run that is
        not registered (it ended, or another process claimed it) stays away: False."""
        ...

    async def end(self, surface: str, run_id: str) -> None: ...

    async def orphans(self, surface: str, *, silent_since: float, limit: int = 20) -> list[str]:
        """Runs of ``surface`` whose last heartbeat is older than ``silent_since``."""
        ...

    async def claim(self, surface: str, run_id: str) -> RunRecord | None:
        """The record, taken out of the registry, its trace with every step added to it;
        None when another process took it first (or it ended)."""
        ...

    async def running(self, surface: str, run_id: str) -> bool:
        """Whether ``run_id`` is registered (being answered by a process that lives, or
        about to be found dead)."""
        ...

    async def record(self, surface: str, run_id: str) -> RunRecord | None:
        """The record of ``run_id`` as its process last wrote it (who asked, where its
        message is); None when it is not registered."""
        ...

    async def count(self, surface: str) -> int:
        """How many runs of ``surface`` are registered, by every process: the live ones and
        those a dead process left (their final edits are all still to come)."""
        ...


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

    async def record(self, surface: str, run_id: str) -> RunRecord | None:
        found = self._records.get((surface, run_id))
        return found[0] if found is not None else None

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


def deliver(handler: StopHandler, run_id: str, by: str, by_id: str = "") -> None:
    """Call one subscriber; its bug is logged, so the others (and the listener) go on."""
    try:
        handler(run_id, by, by_id)
    except Exception:
        log.exception("a stop request handler failed for run %s", run_id)


@asynccontextmanager
async def renewing(
    renew: Callable[[], Awaitable[object]], *, every: float, until: float, what: str
) -> AsyncIterator[None]:
    """Call ``renew`` every ``every`` seconds while the block runs, for at most ``until``
    seconds.

    A lease (a conversation lock, a run slot) should outlive a crashed holder by little, yet a
    live holder may need it longer: a person deciding on an approval pauses the run's
    deadline. So the holder renews it while it lives, up to the longest a healthy run can
    take (``until``); a holder that hangs past that loses it as if it had crashed. A failed
    renewal is logged and tried again at the next beat; the block is never disturbed.

    The beat ends when the block does even if a call inside ``renew`` swallows the
    cancellation (``asyncio.wait_for`` before Python 3.12 does when what it waits for
    completes at the same moment): a beat that went on would keep a finished holder's lease
    alive, and this block's exit waiting for it."""
    ended = False

    async def beat() -> None:
        loop = asyncio.get_running_loop()
        stop_at = loop.time() + until
        while not ended and (left := stop_at - loop.time()) > 0:
            await asyncio.sleep(min(every, left))  # the last beat falls on ``until`` itself
            try:
                await renew()
            except Exception as exc:  # the next beat tries again; the lease is the backstop
                log.warning("could not renew %s: %s", what, exc)

    task = asyncio.get_running_loop().create_task(beat(), name=f"renew {what}")
    try:
        yield
    finally:
        ended = True
        task.cancel()
        await asyncio.wait({task})
