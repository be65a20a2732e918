"""Redis implementations of every store, and the bundle of them on one client.

Imported only when Redis is configured, so ``import core`` never loads redis; nothing
outside this package imports redis. Every redis error leaves it as ``core.errors.StoreUnavailable`` (``raise ... from exc``), with a
message naming host, port and db but never the URL's credentials.

Keys, all under a configurable prefix (default ``reactbot:``)::

    {prefix}history:{conversation}   LIST of JSON messages (long ones packed, ``core.stores.codec``),
                                     last max_turns*2, TTL 7 days
    {prefix}trace:{trace_id}         STRING, the trace packed (``encode_trace``), TTL 30 days
                                     (a vote rewrites it keeping its TTL)
    {prefix}traces:{conversation}    ZSET trace_id -> started_at, trimmed, TTL 30 days
    {prefix}recent-traces            ZSET trace_id -> started_at of every conversation; beyond
                                     max_traces the oldest traces are deleted with their entry
    {prefix}lock:{conversation}      STRING token, SET NX PX lease
    {prefix}event:{event_id}         STRING, SET NX EX claim TTL, or PX the claim's own TTL,
                                     DEL when released (EXISTS when a full Redis
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
    {prefix}search:{query hash}      STRING, a search result packed (``search_cache``), PX
                                     ``tools.search.cache_ttl``
    {prefix}stop                     pub/sub channel: JSON {"run": run_id, "by": who}
    {prefix}approval                 pub/sub channel: JSON {"run", "step", "call", decision}
    {prefix}pending:{run}:{step}:{c} STRING, the request waiting for a decision, PX timeout+60s

Stop requests are pub/sub, so one published while a subscriber is disconnected is lost
for it: the person presses Stop again (the button stays until the run ends).

Where the keys live (``connection``: ``RedisTarget``, ``create_client``): one server, the primary a set of
Sentinels names (followed through a failover), or a Redis Cluster, each over TLS with a
``rediss://`` URL. On a cluster the keys of one conversation (history, lock, traces index,
allow, files) and of one surface (inflight, inflight-beats) carry it as a hash tag,
``{prefix}history:{{conversation}}``, and each usage counter and its holds carry the
counter's name (``{prefix}usage:{{2026-12-06:user:ada}}``), so each script and transaction
over them runs on one slot; on one server and Sentinel the names are as listed above.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from core.stores.protocols import DEFAULT_CLAIM_TTL, DEFAULT_LOCK_LEASE, DEFAULT_TRACE_TTL
from core.stores.redis.channels import (
    RECONNECT_MAX,
    RECONNECT_MIN,
    STOP_POLL,
    RedisDecisions,
    RedisPending,
    RedisStopRequests,
)
from core.stores.redis.connection import (
    DEFAULT_HISTORY_TTL,
    DEFAULT_MAX_TURNS,
    DEFAULT_PREFIX,
    DEFAULT_TIMEOUT,
    MAX_CONNECTIONS,
    POOL_WAIT,
    BlockingSentinelPool,
    Client,
    OnTimePool,
    RedisTarget,
    _describe,
    _unavailable,
    close_client,
    create_client,
    evicts_what_guards_correctness,
    is_out_of_memory,
    log,
    parse_host_port,
)
from core.stores.redis.conversation import (
    PACK_MESSAGES_FROM,
    RedisAllowances,
    RedisFileStore,
    RedisHistoryStore,
    RedisLocks,
)
from core.stores.redis.coordination import (
    CLAIM_REPLICA_WAIT,
    RedisChannelSettings,
    RedisCooldowns,
    RedisEventClaims,
    RedisRateBudget,
    RedisRunRegistry,
    RedisRunSlots,
    RedisUsageCounters,
)
from core.stores.redis.memories import RedisMemories
from core.stores.redis.search_cache import RedisSearchCache
from core.stores.redis.traces import (
    CUT_NOTE,
    DEFAULT_MAX_TRACE_BYTES,
    DEFAULT_MAX_TRACES,
    KEPT_AT_LEAST,
    LARGE_TRACE_CHARS,
    MAX_TRACES_PER_CONVERSATION,
    RAW_REFERS_FROM,
    TRACE_FORMAT,
    TRACE_ZLIB,
    RedisTraceStore,
    cut_to_fit,
    decode_trace,
    encode_trace,
    encode_trace_json,
    stored_json,
)

__all__ = [
    "CLAIM_REPLICA_WAIT",
    "CUT_NOTE",
    "DEFAULT_HISTORY_TTL",
    "DEFAULT_MAX_TRACES",
    "DEFAULT_MAX_TRACE_BYTES",
    "DEFAULT_MAX_TURNS",
    "DEFAULT_PREFIX",
    "DEFAULT_TIMEOUT",
    "KEPT_AT_LEAST",
    "LARGE_TRACE_CHARS",
    "MAX_CONNECTIONS",
    "MAX_TRACES_PER_CONVERSATION",
    "PACK_MESSAGES_FROM",
    "PERSISTENT_KINDS",
    "POOL_WAIT",
    "RAW_REFERS_FROM",
    "RECONNECT_MAX",
    "RECONNECT_MIN",
    "STOP_POLL",
    "TRACE_FORMAT",
    "TRACE_ZLIB",
    "BlockingSentinelPool",
    "Client",
    "OnTimePool",
    "RedisAllowances",
    "RedisChannelSettings",
    "RedisCooldowns",
    "RedisDecisions",
    "RedisEventClaims",
    "RedisFileStore",
    "RedisHistoryStore",
    "RedisLocks",
    "RedisPending",
    "RedisRateBudget",
    "RedisRunRegistry",
    "RedisRunSlots",
    "RedisSearchCache",
    "RedisStopRequests",
    "RedisStores",
    "RedisTarget",
    "RedisTraceStore",
    "RedisUsageCounters",
    "close_client",
    "connect",
    "create_client",
    "cut_to_fit",
    "decode_trace",
    "encode_trace",
    "encode_trace_json",
    "evicts_what_guards_correctness",
    "is_out_of_memory",
    "parse_host_port",
    "stored_json",
]

PERSISTENT_KINDS = frozenset({"channel", "inflight", "inflight-beats", "inflight-steps"})
"""The kinds of key kept without a TTL, on purpose: a channel's settings (what an admin chose
stays until an admin changes it) and the run registry (a record leaves when its run ends or is
claimed). Every other key expires."""


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
    memories: RedisMemories
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
    so a Redis that is down at start-up does not stop the bot (see ``core.stores.resilient``)."""
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
        memories=RedisMemories(client, prefix=prefix),
        usage=RedisUsageCounters(client, prefix=prefix),
    )
