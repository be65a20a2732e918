"""Runs in flight per user on the real Redis: what only Redis has (the key's lifetime, the
fallback while the server is down). What every backend does alike is in ``tests/stores``."""

from __future__ import annotations

import logging

import pytest

from core.stores import InMemoryRunSlots
from core.stores.redis import RedisStores, connect
from core.stores.resilient import ResilientRunSlots, StoreHealth
from tests.integration.conftest import RedisServer


async def test_the_key_of_a_users_slots_never_outlives_them(stores: RedisStores) -> None:
    """Taken, given back, lapsing, a burst: ``tests/stores``. Here: the key's lifetime."""
    assert await stores.slots.take("u", "a", limit=2, lease=30)
    key = f"{stores.stops.channel[: -len('stop')]}runs:u"
    assert 29_000 < await stores.client.pttl(key) <= 30_000
    await stores.slots.give_back("u", "a")
    assert await stores.client.exists(key) == 0, "no slot left: no key"


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
