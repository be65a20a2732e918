"""Every store as a small protocol: what the agent, the answering pipeline and the adapters
may ask of one, whatever keeps it.

``core.stores.memory`` implements them in this process (the embedded default),
``core.stores.redis`` on a Redis shared by many processes, and ``core.stores.resilient``
wraps either so that a Redis that is away degrades the bot instead of failing it.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Literal, Protocol, runtime_checkable

from core.llm import Message
from core.stores.records import (
    ApprovalRequest,
    Decision,
    DecisionHandler,
    Line,
    RequestKey,
    RunRecord,
    Standing,
)
from core.tools import ToolResult
from core.tools.lookup import Passage
from core.trace import Trace

OnWait = Callable[[], Awaitable[None] | None]
"""Called once when a run has to wait for the previous one in its conversation."""

Clock = Callable[[], float]

StopHandler = Callable[[str, str, str], None]
"""Told ``(run_id, by, by_id)``: by whom a run is to be stopped (their id beside, or ""),
for each stop request heard; must not block."""


DEFAULT_TRACE_TTL = 30 * 24 * 3600
DEFAULT_LOCK_LEASE = 180.0
DEFAULT_CLAIM_TTL = 900


# ---- conversations --------------------------------------------------------------------


class HistoryStore(Protocol):
    async def load(self, conversation: str) -> list[Message]: ...

    async def append(self, conversation: str, *messages: Message) -> None: ...

    async def clear(self, conversation: str) -> None: ...


@runtime_checkable
class ReplaceableHistory(Protocol):
    """A history store that can swap a conversation's messages at once (used for summaries)."""

    async def replace(self, conversation: str, messages: Sequence[Message]) -> None: ...


class ConversationLocks(Protocol):
    def hold(
        self, conversation: str, *, on_wait: OnWait | None = None
    ) -> AbstractAsyncContextManager[None]:
        """Serialise runs in ``conversation``; ``on_wait`` is called once if this one waits."""
        ...


class FileStore(Protocol):
    """The passages of the files attached in each conversation."""

    async def load(self, conversation: str) -> list[Passage]: ...

    async def add(self, conversation: str, passages: Sequence[Passage]) -> None: ...

    async def clear(self, conversation: str) -> None: ...


class Allowances(Protocol):
    """Tools a conversation allowed once for all ("Allow for this conversation")."""

    async def allowed(self, conversation: str, tool: str) -> str | None:
        """Who allowed ``tool`` in ``conversation``, or None."""
        ...

    async def allow(self, conversation: str, tool: str, *, by: str) -> None: ...


# ---- traces ---------------------------------------------------------------------------


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

    async def vote(self, run_id: str, value: Literal["up", "down"], by: str) -> bool:
        """``by``'s 👍 or 👎 on the answer of run ``run_id``, kept on its stored trace
        (replacing their earlier vote) in one atomic step, so no vote cast at the same
        moment, on any process, is lost; False when the trace is no longer stored."""
        ...


# ---- coordination between processes ----------------------------------------------------


class EventClaims(Protocol):
    async def claim(self, event_id: str, *, ttl: float | None = None) -> bool:
        """True for the first claim of ``event_id`` (within ``ttl`` seconds, the store's
        claim TTL when None), False after."""
        ...

    async def release(self, event_id: str) -> None:
        """Forget the claim of ``event_id``: the next claim of it is the first again (a
        claim taken for work that did not happen)."""
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

    async def get(self, surface: str, run_id: str) -> RunRecord | None:
        """The record of ``run_id`` as its process last wrote it (who asked, where its
        message is); None when it is not registered."""
        ...

    async def record(self, surface: str, run_id: str) -> RunRecord | None:
        """``get`` by its earlier name, until its callers say ``get``."""
        ...

    async def count(self, surface: str) -> int:
        """How many runs of ``surface`` are registered, by every process: the live ones and
        those a dead process left (their final edits are all still to come)."""
        ...


class UsageCounters(Protocol):
    """Integer counters that vanish at a given time (the end of their day), and the holds of
    the runs in flight on them."""

    async def add(self, key: str, amount: int, *, expire_at: float) -> int:
        """Adds ``amount`` and returns the new count, atomically."""
        ...

    async def get(self, keys: Sequence[str]) -> list[int]:
        """The counts (0 for a counter never added to or expired)."""
        ...

    async def hold(
        self, run: str, lines: Sequence[Line], *, lease: float, expire_at: float
    ) -> list[Standing] | None:
        """In one atomic step: when every line has something left after its count and the
        other runs' unexpired holds, ``run`` holds ``min(estimate, left)`` on each for
        ``lease`` seconds and None is returned; else nothing is held and the answer is where
        each line stood, up to the first that refused (``up_to_refusal``)."""
        ...

    async def renew(self, run: str, counters: Sequence[str], *, lease: float) -> None:
        """``run``'s holds on ``counters`` last ``lease`` seconds from now."""
        ...

    async def settle(
        self, run: str, counters: Sequence[str], amounts: Sequence[int], *, expire_at: float
    ) -> None:
        """Adds each amount to its counter and drops ``run``'s hold on it, each counter in
        one atomic step (an amount of 0 drops the hold only)."""
        ...


# ---- approvals ----------------------------------------------------------------------------


class DecisionChannel(Protocol):
    """Decisions made on any process, heard by the process running the run."""

    async def publish(self, key: RequestKey, decision: Decision) -> None: ...

    def subscribe(self, handler: DecisionHandler) -> AbstractAsyncContextManager[None]: ...


class PendingRequests(Protocol):
    """The requests waiting for a decision, readable by every process: a click on another
    process needs the request (an Edit modal shows its input)."""

    async def put(self, request: ApprovalRequest) -> None: ...

    async def get(self, key: RequestKey) -> ApprovalRequest | None: ...

    async def drop(self, key: RequestKey) -> None: ...


# ---- the search cache ---------------------------------------------------------------------


class SearchCache(Protocol):
    """Where finished search results are kept for a while, keyed by a normalised query."""

    async def get(self, key: str) -> ToolResult | None: ...

    async def set(self, key: str, value: ToolResult, ttl: float) -> None: ...
