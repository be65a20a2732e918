"""Every store one process uses, as one typed bundle.

``Stores.in_memory()`` is the embedded default (one process, nothing survives a restart);
``Stores.redis(url, ...)`` puts each store on one Redis client, shared by every process that
names the same server and prefix; ``.resilient()`` wraps each store so a Redis that is away
degrades the bot (answers without memory, claims and traces kept in this process) instead of
failing it, all sharing one ``StoreHealth``. The Agent, the answering pipeline and the
adapters are handed the bundle; nobody lists its stores field by field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.memories import InMemoryMemories, MemoryStore
from core.stores.memory import (
    InMemoryAllowances,
    InMemoryChannelSettings,
    InMemoryCooldowns,
    InMemoryDecisions,
    InMemoryEventClaims,
    InMemoryFileStore,
    InMemoryHistoryStore,
    InMemoryLocks,
    InMemoryPending,
    InMemoryRunRegistry,
    InMemoryRunSlots,
    InMemoryStopRequests,
    InMemoryTraceStore,
    InMemoryUsageCounters,
)
from core.stores.protocols import (
    DEFAULT_CLAIM_TTL,
    DEFAULT_LOCK_LEASE,
    DEFAULT_TRACE_TTL,
    Allowances,
    ChannelSettings,
    ConversationLocks,
    Cooldowns,
    DecisionChannel,
    EventClaims,
    FileStore,
    HistoryStore,
    PendingRequests,
    RunRegistry,
    RunSlots,
    StopRequests,
    TraceStore,
    UsageCounters,
)

if TYPE_CHECKING:  # the Redis client and the wrappers load only for bundles that use them
    from core.stores.redis import RedisStores, RedisTarget
    from core.stores.resilient import OnUnavailable, StoreHealth

DEFAULT_MAX_TURNS = 10
DEFAULT_HISTORY_TTL = 7 * 24 * 3600


@dataclass(frozen=True, slots=True)
class Stores:
    history: HistoryStore
    traces: TraceStore
    locks: ConversationLocks
    claims: EventClaims
    """Each platform event is answered once, whichever process received it."""
    cooldowns: Cooldowns
    stops: StopRequests
    """A Stop pressed on one process reaches the process running the run."""
    slots: RunSlots
    """Runs in flight per person (``agent.max_runs_per_user``)."""
    runs: RunRegistry
    """The answers being written and their heartbeats: a process that dies mid-answer
    leaves them for a live one to finish (``adapters.recovery``)."""
    decisions: DecisionChannel
    pending: PendingRequests
    allowances: Allowances
    """Tools a person allowed for a whole conversation."""
    channel_settings: ChannelSettings
    """What admins set per channel (verbosity, model, persona, tools)."""
    usage: UsageCounters
    """Tokens spent per person and channel today (``budgets.*``)."""
    files: FileStore
    """Passages of the files attached in each conversation (``files.*``)."""
    health: StoreHealth | None = None
    """Whether the shared store answered lately (resilient bundles only)."""
    shared: RedisStores | None = None
    """The Redis stores underneath (their client, their address), when on Redis."""
    memories: MemoryStore = field(default_factory=InMemoryMemories)
    """What people asked the bot to remember (``core.memories``): kept without a TTL."""

    @classmethod
    def in_memory(
        cls,
        *,
        max_turns: int = DEFAULT_MAX_TURNS,
        lock_lease: float = DEFAULT_LOCK_LEASE,
        lock_hold_at_most: float | None = None,
    ) -> Stores:
        return cls(
            history=InMemoryHistoryStore(max_turns=max_turns),
            traces=InMemoryTraceStore(),
            locks=InMemoryLocks(lease_seconds=lock_lease, hold_at_most=lock_hold_at_most),
            claims=InMemoryEventClaims(),
            cooldowns=InMemoryCooldowns(),
            stops=InMemoryStopRequests(),
            slots=InMemoryRunSlots(),
            runs=InMemoryRunRegistry(),
            decisions=InMemoryDecisions(),
            pending=InMemoryPending(),
            allowances=InMemoryAllowances(),
            channel_settings=InMemoryChannelSettings(),
            usage=InMemoryUsageCounters(),
            files=InMemoryFileStore(),
        )

    @classmethod
    def redis(
        cls,
        url: str | RedisTarget,
        *,
        prefix: str = "reactbot:",
        max_turns: int = DEFAULT_MAX_TURNS,
        history_ttl: int = DEFAULT_HISTORY_TTL,
        store_steps: bool = False,
        trace_ttl: int = DEFAULT_TRACE_TTL,
        max_traces: int | None = None,
        max_trace_bytes: int | None = None,
        lock_lease: float = DEFAULT_LOCK_LEASE,
        lock_hold_at_most: float | None = None,
        claim_ttl: int = DEFAULT_CLAIM_TTL,
    ) -> Stores:
        """Every store on one client (no I/O yet: it connects on first use, so a Redis that
        is down at start does not stop the bot): ``url`` is one server's URL, or a
        ``RedisTarget`` (Sentinel, Cluster, TLS files). Close it with ``aclose``. ``max_traces``
        (0: no bound) and ``max_trace_bytes`` bound the traces; None: the defaults."""
        from core.stores.redis import DEFAULT_MAX_TRACE_BYTES, DEFAULT_MAX_TRACES, connect

        return cls.on(
            connect(
                url,
                prefix=prefix,
                max_turns=max_turns,
                history_ttl=history_ttl,
                store_steps=store_steps,
                trace_ttl=trace_ttl,
                max_traces=DEFAULT_MAX_TRACES if max_traces is None else max_traces,
                max_trace_bytes=max_trace_bytes or DEFAULT_MAX_TRACE_BYTES,
                lock_lease=lock_lease,
                lock_hold_at_most=lock_hold_at_most,
                claim_ttl=claim_ttl,
            )
        )

    @classmethod
    def on(cls, shared: RedisStores) -> Stores:
        """The bundle of Redis stores ``shared`` (one client, one prefix)."""
        return cls(
            history=shared.history,
            traces=shared.traces,
            locks=shared.locks,
            claims=shared.claims,
            cooldowns=shared.cooldowns,
            stops=shared.stops,
            slots=shared.slots,
            runs=shared.runs,
            decisions=shared.decisions,
            pending=shared.pending,
            allowances=shared.allowances,
            channel_settings=shared.channel_settings,
            usage=shared.usage,
            files=shared.files,
            shared=shared,
            memories=shared.memories,
        )

    def resilient(
        self,
        *,
        health: StoreHealth | None = None,
        lock_lease: float = DEFAULT_LOCK_LEASE,
        lock_hold_at_most: float | None = None,
        on_unavailable: OnUnavailable | None = None,
    ) -> Stores:
        """Each store wrapped to degrade while the shared store is away, sharing ``health``
        (a new one, named after the store, unless given). ``lock_lease`` and
        ``lock_hold_at_most`` bound the in-process locks used meanwhile."""
        import core.stores.resilient as r

        if health is None:
            name = self.shared.address if self.shared is not None else "the shared store"
            health = r.StoreHealth(on_unavailable=on_unavailable, name=name)
        local_locks = InMemoryLocks(lease_seconds=lock_lease, hold_at_most=lock_hold_at_most)
        return Stores(
            history=r.ResilientHistory(self.history, health=health),
            traces=r.ResilientTraceStore(self.traces, health=health),
            locks=r.ResilientLocks(self.locks, health=health, local=local_locks),
            claims=r.ResilientEventClaims(inner=self.claims, health=health),
            cooldowns=r.ResilientCooldowns(self.cooldowns, health=health),
            stops=r.ResilientStopRequests(self.stops, health=health),
            slots=r.ResilientRunSlots(self.slots, health=health),
            runs=r.ResilientRunRegistry(self.runs, health=health),
            decisions=r.ResilientDecisions(self.decisions, health=health),
            pending=r.ResilientPending(self.pending, health=health),
            allowances=r.ResilientAllowances(self.allowances, health=health),
            channel_settings=r.ResilientChannelSettings(self.channel_settings, health=health),
            usage=r.CheckedUsageCounters(self.usage, health=health),
            files=r.CheckedFileStore(self.files, health=health),
            health=health,
            shared=self.shared,
            memories=r.CheckedMemories(self.memories, health=health),
        )

    @property
    def client(self) -> Any:
        """The Redis client underneath (search cache, rate budgets), or None in memory."""
        return self.shared.client if self.shared is not None else None

    async def aclose(self) -> None:
        if self.shared is not None:
            await self.shared.aclose()
