"""Messages between processes on Redis: stop requests and approval decisions (pub/sub), and
the approval requests waiting for a decision.

Stop requests are pub/sub, so one published while a subscriber is disconnected is lost for
it: the person presses Stop again (the button stays until the run ends).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator, Callable
from contextlib import (
    AbstractAsyncContextManager,
    asynccontextmanager,
    suppress,
)
from dataclasses import asdict
from typing import Any, cast

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from core.stores.protocols import (
    StopHandler,
)
from core.stores.records import (
    ApprovalRequest,
    Decision,
    DecisionHandler,
    RequestKey,
    key_of,
)
from core.stores.redis.connection import (
    DEFAULT_PREFIX,
    DEFAULT_TIMEOUT,
    Client,
    _describe,
    _RedisBase,
)
from core.stores.waiting import deliver

log = logging.getLogger(__name__)


STOP_POLL = 1.0
"""Seconds a stop listener waits for a message before checking in again (not a latency:
a message wakes it at once)."""
RECONNECT_MIN, RECONNECT_MAX = 0.1, 2.0


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
