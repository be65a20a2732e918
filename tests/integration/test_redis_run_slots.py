"""Runs in flight per user, counted across processes through the real Redis: the check and
the reservation are one step, so a burst of questions cannot all slip past the limit."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from core.redis_store import RedisStores, connect
from core.resilient import ResilientRunSlots, StoreHealth
from core.stores import InMemoryRunSlots
from tests.integration.conftest import RedisServer


@pytest.fixture
async def other(redis_url: str, redis_prefix: str) -> AsyncIterator[RedisStores]:
    """A second process: its own client on the same server and prefix."""
    opened = connect(redis_url, prefix=redis_prefix)
    yield opened
    await opened.aclose()


async def test_a_burst_from_two_processes_gets_exactly_the_limit(
    stores: RedisStores, other: RedisStores
) -> None:
    takes = [
        (stores if i % 2 else other).slots.take("discord:7", f"q{i}", limit=2, lease=30)
        for i in range(40)
    ]
    granted = await asyncio.gather(*takes)
    assert sum(granted) == 2
    assert await stores.slots.take("discord:8", "other-user", limit=2, lease=30)


async def test_a_slot_given_back_frees_room_and_a_lease_expires(
    stores: RedisStores, other: RedisStores
) -> None:
    assert await stores.slots.take("u", "a", limit=1, lease=30)
    assert not await other.slots.take("u", "b", limit=1, lease=30)
    assert await stores.slots.take("u", "a", limit=1, lease=30), "taking one's own slot again"
    await other.slots.give_back("u", "a")
    assert await other.slots.take("u", "b", limit=1, lease=0.2)
    await asyncio.sleep(0.3)  # a process died holding "b": its lease runs out
    assert await stores.slots.take("u", "c", limit=1, lease=30)
    key = f"{stores.stops.channel[: -len('stop')]}runs:u"
    assert 0 < await stores.client.pttl(key) <= 30_000, "the key never outlives its slots"


async def test_while_redis_is_down_this_process_still_counts(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    stores = connect(redis_server.url, prefix="slots:")
    health = StoreHealth(retry_after=0, name=stores.address)
    slots = ResilientRunSlots(stores.slots, health=health, local=InMemoryRunSlots())
    try:
        assert await slots.take("u", "a", limit=2, lease=30)  # granted by Redis, mirrored
        redis_server.kill()
        with caplog.at_level(logging.WARNING, logger="core.resilient"):
            assert await slots.take("u", "b", limit=2, lease=30)
            assert not await slots.take("u", "c", limit=2, lease=30)
            await slots.give_back("u", "a")
            assert await slots.take("u", "c", limit=2, lease=30)
        outages = [r for r in caplog.records if "is unavailable" in r.getMessage()]
        assert len(outages) == 1, "one line per outage, not one per call"
        assert f"127.0.0.1:{redis_server.port}" in outages[0].getMessage()
        redis_server.start()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="core.resilient"):
            assert await slots.take("u2", "x", limit=1, lease=30)
        assert any("answers again" in r.getMessage() for r in caplog.records)
    finally:
        await stores.aclose()
