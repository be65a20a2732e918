"""Redis dies mid-conversation and comes back: the bot keeps answering, nothing stored is lost.

Each test runs its own ``redis-server`` (AOF, fsync always) so it can be killed and restarted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest
import redis.exceptions

from core.errors import StoreUnavailable
from core.history import Message
from core.stores import Stores
from core.stores.redis import RedisStores, connect
from core.stores.resilient import StoreHealth
from core.trace import Trace
from tests.integration.conftest import RedisServer
from tests.stores import refusal as refused_now

T = TypeVar("T")
FAST = 1.5  # seconds: the most one operation may cost while Redis is dead or hung


def turn(i: int) -> list[Message]:
    return [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]


async def timed(action: Callable[[], Awaitable[T]]) -> tuple[T, float]:
    started = time.monotonic()
    result = await action()
    return result, time.monotonic() - started


def wrap(stores: RedisStores, *, retry_after: float) -> Stores:
    return Stores.on(stores).resilient(health=StoreHealth(retry_after=retry_after))


@pytest.fixture
async def redis_stores(redis_server: RedisServer) -> AsyncIterator[RedisStores]:
    opened = connect(redis_server.url, prefix="fault:")
    yield opened
    await opened.aclose()


async def test_killed_server_degrades_fast_and_recovers_with_everything_stored(
    redis_server: RedisServer, redis_stores: RedisStores
) -> None:
    # retry_after=0: every call tries Redis again, to show each one fails fast on its own.
    wrapped = wrap(redis_stores, retry_after=0)
    for i in range(3):
        await wrapped.history.append("c", *turn(i))
    before = Trace(question="q2", conversation="c", started_at=time.time(), status="answered")
    await wrapped.traces.save(before)

    redis_server.kill()

    with pytest.raises(StoreUnavailable):
        await redis_stores.history.load("c")  # the raw store fails, typed

    loaded, seconds = await timed(lambda: wrapped.history.load("c"))
    assert loaded == [] and seconds < FAST
    assert wrapped.health.degraded and wrapped.health.take_notice("c")
    assert not wrapped.health.take_notice("c")  # the notice is said once

    _, seconds = await timed(lambda: wrapped.history.append("c", *turn(3)))
    assert seconds < FAST  # the write is dropped
    assert (await timed(lambda: wrapped.claims.claim("evt")))[0] is True
    assert await wrapped.claims.claim("evt") is False  # still once, in this process

    started = time.monotonic()
    async with wrapped.locks.hold("c"):  # falls back to the in-process lock
        pass
    assert time.monotonic() - started < FAST

    during = Trace(question="q3", conversation="c", started_at=time.time() + 1)
    _, seconds = await timed(lambda: wrapped.traces.save(during))
    assert seconds < FAST
    assert (await wrapped.traces.last("c")) is not None

    redis_server.start()  # same port and directory: the AOF is replayed

    # The same client object, no reconnect call: redis-py reconnects on the next command.
    assert await wrapped.history.load("c") == turn(0) + turn(1) + turn(2)
    assert not wrapped.health.degraded
    await wrapped.history.append("c", *turn(4))
    assert await redis_stores.history.load("c") == turn(0) + turn(1) + turn(2) + turn(4)
    restored = await redis_stores.traces.get(before.id)
    assert restored is not None and restored.question == "q2"
    assert await redis_stores.claims.claim("evt-new") is True
    async with redis_stores.locks.hold("c"):  # the release script is loaded again
        pass
    assert await redis_stores.client.exists("fault:lock:c") == 0


async def test_hung_server_costs_about_a_second_per_turn(
    redis_server: RedisServer, redis_stores: RedisStores
) -> None:
    await redis_stores.history.append("c", *turn(1))
    wrapped = wrap(redis_stores, retry_after=0.3)

    redis_server.pause()  # connections are accepted by the kernel, nothing ever answers
    try:
        loaded, seconds = await timed(lambda: wrapped.history.load("c"))
        assert loaded == [] and seconds < FAST  # one socket timeout, retried once
        # The same turn's write does not wait for a second timeout: Redis failed moments ago.
        _, seconds = await timed(lambda: wrapped.history.append("c", *turn(2)))
        assert seconds < 0.05
        assert wrapped.health.take_notice("c")
    finally:
        redis_server.resume()

    await asyncio.sleep(0.3)
    assert await wrapped.history.load("c") == turn(1)
    assert not wrapped.health.degraded


class _LostReplies:
    """A real client whose SET takes on the server but whose reply never arrives (a socket
    timeout under load): the ambiguous case a lock must clean up after."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def set(self, *args: Any, **kwargs: Any) -> Any:
        await self._client.set(*args, **kwargs)
        raise redis.exceptions.TimeoutError("Timeout reading from socket")


async def test_a_lock_whose_set_reply_was_lost_is_released_in_the_background(
    redis_url: str, redis_prefix: str
) -> None:
    from core.stores.redis import RedisLocks, create_client

    client = create_client(redis_url)
    locks = RedisLocks(client, prefix=redis_prefix, lease_seconds=120.0)
    locks._client = _LostReplies(client)  # type: ignore[assignment]
    try:
        with pytest.raises(StoreUnavailable):
            async with locks.hold("c1"):
                pass
        key = f"{redis_prefix}lock:c1"
        assert await client.exists(key) == 1, "the SET took, though its caller never knew"
        async with asyncio.timeout(5):  # not the 120 s lease
            while await client.exists(key):  # noqa: ASYNC110 - polls Redis
                await asyncio.sleep(0.05)
    finally:
        await client.aclose()


async def test_token_counts_files_and_the_shared_update_budget_share_the_stores_health(
    redis_server: RedisServer,
) -> None:
    """The app's other Redis users go through the same ``StoreHealth`` as its stores: a hung
    server costs one timeout, is counted once (``reactbot_redis_errors``), and the calls
    after it fail at once until the store is tried again."""
    from bot.app import App
    from bot.config import Config, Secrets

    config = Config.model_validate(
        {
            "redis": {"url": redis_server.url, "prefix": "fault:"},
            "budgets": {"tokens_per_user_per_day": 1000},
            "secrets": Secrets.from_env({}),
        }
    )
    app = App.create(config)
    try:
        budget = app.rate_budget("slack:chat.update", limit=50)
        assert app.health is not None and budget is not None
        assert await app.stores.files.load("c") == []  # answering
        redis_server.pause()
        try:
            _, seconds = await timed(lambda: _refused(app.stores.files.load("c")))
            assert seconds < FAST and app.health.failures == 1
            refusal, seconds = await timed(lambda: refused_now(app.budgets, "u", "channel"))
            assert refusal is None and seconds < 0.05  # not checked, rather than not answered
            _, seconds = await timed(lambda: _refused(budget.take(0)))
            assert seconds < 0.05
            _, seconds = await timed(lambda: _refused(app.stores.files.add("c", [])))
            assert seconds < 0.05
            assert app.health.failures == 1 and app.health.degraded
        finally:
            redis_server.resume()
    finally:
        await app.aclose()


async def _refused(call: Awaitable[Any]) -> None:
    with pytest.raises(StoreUnavailable):
        await call
