"""Where the stores' keys live, and how a client reaches them: one server, the primary a set
of Sentinels names (followed through a failover), or a Redis Cluster, each over TLS with a
``rediss://`` URL; every command limited in the loop's punctual time.

Every redis error leaves the stores as ``core.errors.StoreUnavailable`` (``StoreFull`` for an
out-of-memory refusal) through ``_unavailable``, with a message naming host, port and db but
never the URL's credentials.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import (
    AbstractContextManager,
    contextmanager,
)
from dataclasses import dataclass
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

from core.errors import StoreFull, StoreUnavailable
from core.looplag import on_time

log = logging.getLogger(__name__)


DEFAULT_PREFIX = "reactbot:"


DEFAULT_MAX_TURNS = 10
DEFAULT_HISTORY_TTL = 7 * 24 * 3600
DEFAULT_TIMEOUT = 0.5
POOL_WAIT = 3.0
"""Seconds a command may wait for a free pooled connection (all of them busy)."""
MAX_CONNECTIONS = 100
"""Connections per process; more concurrent commands wait for one (see ``create_client``)."""


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


async def _undecoded(client: Client, *command: str) -> Any:
    """``command``'s reply as bytes: the client decodes replies as text, which compressed
    values are not."""
    return await client.execute_command(*command, **{NEVER_DECODE: True})


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
