"""A full Redis (``maxmemory`` reached, ``noeviction``) refuses writes with OOM (issue 26):
the bot answers without memory and says so once, counts each refusal, keeps using Redis for
what still works (reads), and a redelivered event claimed before is not answered twice.

Each test runs its own ``redis-server`` (the shared one is not filled for everyone else)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from core.agent import Agent, AgentSettings
from core.errors import StoreFull
from core.memory import UNAVAILABLE
from core.scripted import ScriptedModel, Turn
from core.stores import Stores
from core.stores.redis import RedisStores, connect
from core.stores.resilient import StoreHealth
from core.tools import ToolRegistry
from core.trace import Trace
from tests.integration.conftest import RedisServer

PREFIX = "full:"


@pytest.fixture
async def replicas(redis_server: RedisServer) -> AsyncIterator[list[RedisStores]]:
    """The Redis stores of two replicas of the bot, on the test's own server."""
    opened = [connect(redis_server.url, prefix=PREFIX) for _ in range(2)]
    yield opened
    for stores in opened:
        await stores.aclose()


async def fill_up(url: str) -> None:
    """From now on every write is refused: ``maxmemory`` below what the server uses."""
    client = aioredis.from_url(url)
    try:
        await client.config_set("maxmemory-policy", "noeviction")
        await client.config_set("maxmemory", "1")
    finally:
        await client.aclose()


def resilient(stores: RedisStores) -> Stores:
    return Stores.on(stores).resilient(health=StoreHealth(retry_after=5.0))


async def test_a_refused_write_is_typed_as_full(
    redis_server: RedisServer, replicas: list[RedisStores]
) -> None:
    await fill_up(redis_server.url)
    with pytest.raises(StoreFull, match=r"out of memory \(OOM, maxmemory reached\)"):
        await replicas[0].history.append("c", {"role": "user", "content": "q"})
    with pytest.raises(StoreFull):  # a transaction's refusal too (the trace's MULTI/EXEC)
        await replicas[0].traces.save(Trace("q", conversation="c"))


async def test_a_redelivered_event_is_not_answered_twice_when_redis_is_full(
    redis_server: RedisServer, replicas: list[RedisStores]
) -> None:
    first, second = (resilient(r) for r in replicas)
    assert await first.claims.claim("slack:Ev1") is True  # the first delivery, Redis not full

    await fill_up(redis_server.url)
    # The second replica's memory write is refused first: that must not make it skip Redis
    # for the claim that follows (a full server still answers reads).
    await second.history.append("slack:T:C:1", {"role": "user", "content": "q"})
    assert second.health is not None and second.health.out_of_memory == 1

    # The retry of the same event reaches the other replica: the claim is still seen.
    assert await second.claims.claim("slack:Ev1") is False
    # A new event cannot be recorded: it is answered (claimed in this process), and counted.
    assert await second.claims.claim("slack:Ev2") is True
    assert await second.claims.claim("slack:Ev2") is False
    assert second.health.out_of_memory == 2
    assert not second.health.degraded  # full is not down: reads keep going to Redis
    assert await replicas[1].history.load("slack:T:C:1") == []


async def test_the_bot_answers_without_memory_and_says_so_once(
    redis_server: RedisServer, replicas: list[RedisStores]
) -> None:
    stores = resilient(replicas[0])
    conversation = "slack:T:C:1"
    await stores.history.append(
        conversation,
        {"role": "user", "content": "my name is Ada"},
        {"role": "assistant", "content": "Hello Ada"},
    )
    await fill_up(redis_server.url)
    model = ScriptedModel([Turn("Final Answer: 4"), Turn("Final Answer: 5")])
    agent = Agent(model, ToolRegistry(), stores=stores, settings=AgentSettings(deadline=30))

    final = await agent.start("2+2?", conversation=conversation, user="U1").wait()
    assert final.trace.status == "answered" and final.trace.answer == "4"
    assert UNAVAILABLE in final.trace.notices  # the answer was not remembered: said
    assert stores.health is not None and stores.health.out_of_memory >= 2  # history, trace
    # What was stored before is still read (the server answers): it was not lost.
    assert [m["content"] for m in await stores.history.load(conversation)] == [
        "my name is Ada",
        "Hello Ada",
    ]
    again = await agent.start("2+3?", conversation=conversation, user="U1").wait()
    assert again.trace.answer == "5"
    assert again.trace.notices.count(UNAVAILABLE) == 1  # once per reply, not once per write
    model.assert_complete()
