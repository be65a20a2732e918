"""Memories on the real Redis: the store's rules, one hash per holder with no TTL under the
holder's hash tag, the limit held across processes, and memories of many holders spread
over a real Redis Cluster."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from core.memories import Asking, Holder, Memories, MemoryRefused, MemorySettings
from core.stores.redis import RedisStores, RedisTarget, connect
from core.stores.redis.memories import RedisMemories
from tests.integration.redis_topologies import cluster
from tests.memories import SLACK_C1, check_memory_store, memory


@pytest.fixture
async def memories(stores: RedisStores, redis_prefix: str) -> RedisMemories:
    return RedisMemories(stores.client, prefix=redis_prefix)


async def test_the_redis_store_keeps_the_rules(memories: RedisMemories) -> None:
    await check_memory_store(memories)


async def test_a_holders_memories_are_one_hash_with_no_ttl(
    memories: RedisMemories, stores: RedisStores, redis_prefix: str
) -> None:
    await memories.add(memory("m1", "a fact", at=1.0, where=SLACK_C1), limit=5)
    odd = Holder.person("web", "}{odd%7B")
    await memories.add(memory("m2", "b", by="}{odd%7B", at=1.0, where=SLACK_C1), limit=5)
    keys = sorted([k async for k in stores.client.scan_iter(match=redis_prefix + "*")])
    assert keys == sorted(
        [
            f"{redis_prefix}memories:{{person:slack:U1}}",
            memories.key(Holder.person("slack", "}{odd%7B")),
        ]
    )
    assert memories.key(odd) != memories.key(Holder.person("web", "}{odd{"))
    for key in keys:
        assert await stores.client.ttl(key) == -1, "persistent on purpose"
        assert key.count("{") == 1 and key.count("}") == 1, "one hash tag, whole"


async def test_two_processes_cannot_both_pass_the_limit(redis_url: str, redis_prefix: str) -> None:
    opened = [connect(redis_url, prefix=redis_prefix) for _ in range(2)]
    try:
        ada = Asking("U1", "Ada", False, SLACK_C1)
        sides = [
            Memories(RedisMemories(s.client, prefix=redis_prefix), MemorySettings(max_per_user=5))
            for s in opened
        ]
        results = await asyncio.gather(
            *(sides[i % 2].remember(ada, f"fact {i}", "person") for i in range(12)),
            return_exceptions=True,
        )
        kept = [r for r in results if not isinstance(r, BaseException)]
        refused = [r for r in results if isinstance(r, MemoryRefused)]
        assert len(kept) == 5 and len(refused) == 7
        assert len(await sides[1].store.list(Holder.person("slack", "U1"))) == 5
        # a deletion on one process holds on the other's next read
        await sides[0].forget(ada, kept[0].id)
        assert kept[0].id not in [m.id for m in await sides[1].recall(ada)]
    finally:
        for s in opened:
            await s.aclose()


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with cluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


@pytest.mark.slow
async def test_memories_on_a_cluster(redis_cluster) -> None:  # type: ignore[no-untyped-def]
    stores = connect(
        RedisTarget(url=redis_cluster.url, cluster=True), prefix=f"t{uuid.uuid4().hex[:8]}:"
    )
    try:
        on_cluster = RedisMemories(stores.client, prefix=f"t{uuid.uuid4().hex[:8]}:")
        await check_memory_store(on_cluster)
        for i in range(20):
            await on_cluster.add(memory(f"m{i}", "x", by=f"U{i}", at=1.0, where=SLACK_C1), limit=1)
        for i in range(20):
            assert len(await on_cluster.list(Holder.person("slack", f"U{i}"))) == 1
    finally:
        await stores.aclose()


async def test_a_redis_that_is_away_costs_one_timeout_then_fails_at_once() -> None:
    """Through the resilient bundle: the first read waits for the dead server, the next
    ones within the retry window fail at once; a run says so and answers anyway."""
    from core.errors import StoreUnavailable
    from core.stores import Stores

    stores = Stores.redis("redis://127.0.0.1:1/0", prefix="t:").resilient()
    try:
        ada = Holder.person("slack", "U1")
        with pytest.raises(StoreUnavailable):
            await stores.memories.list(ada)
        assert stores.health is not None and stores.health.degraded
        with pytest.raises(StoreUnavailable, match="not retried yet"):
            await stores.memories.add(memory("m1", "x", at=1.0, where=SLACK_C1), limit=5)
    finally:
        await stores.aclose()


async def test_a_fact_with_a_lone_surrogate_is_kept_not_crashed(memories: RedisMemories) -> None:
    """Hole: a model's JSON may hold a lone surrogate ("\\ud800"); ``remember`` passed it
    to Redis, whose encoder raised UnicodeEncodeError: neither kept nor said in one line."""
    ada = Asking("U1", "Ada", False, SLACK_C1)
    kept = await Memories(memories).remember(ada, "call me \ud800Ada\u202e", "person")
    assert kept.text == "call me Ada"
    assert [m.text for m in await memories.list(Holder.person("slack", "U1"))] == ["call me Ada"]
