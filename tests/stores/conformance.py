"""The store conformance suite's backends: every protocol's tests run on each of them.

- ``memory``: the in-process stores, their time a ``FakeClock`` the test advances;
- ``redis``: the real server (``REDIS_URL``), under the test's own key prefix;
- ``resilient(memory)`` and ``resilient(redis)``: the same wrapped as the bot runs them
  (``Stores.resilient()``), their fallbacks on the real clock;
- ``redis-cluster``: a three-node Redis Cluster the session starts
  (``tests.integration.redis_topologies``; marked ``slow``).

A backend gives two views of one store, ``here`` and ``there``: two processes on Redis (each
its own client), one and the same bundle in memory. ``advance(seconds)`` lets that much of the
store's time pass: the fake clock moves at once; Redis keeps time itself (its TTLs and
``TIME``), so there the test waits that long: time-bound cases use ``SHORT``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from adapters.pacing import Budget, FallbackBudget, LocalBudget
from core.stores import (
    InMemoryCooldowns,
    InMemoryEventClaims,
    InMemoryRunSlots,
    InMemorySearchCache,
    InMemoryTraceStore,
    InMemoryUsageCounters,
    SearchCache,
    Stores,
)
from core.stores.redis.connection import RedisTarget

SHORT = 0.5
"""Seconds a short-lived entry lives in these tests. They only wait for it to lapse, never
check it inside its time (a loaded machine may take longer than that between two commands):
what holds meanwhile is checked on entries that live a minute."""

BACKENDS = ("memory", "redis", "resilient(memory)", "resilient(redis)", "redis-cluster")


class FakeClock:
    """Time that moves only when told; it starts at the wall clock's time, since some stores
    compare it with wall-clock instants (a day's end)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@dataclass
class Backend:
    name: str
    here: Stores
    there: Stores
    advance: Callable[[float], Awaitable[None]]
    budgets: Callable[[int, float], tuple[Budget, Budget]]
    """Two replicas' views of one rate budget of ``limit`` requests ``per`` seconds."""
    caches: tuple[SearchCache, SearchCache]


def _in_memory(clock: FakeClock) -> Stores:
    return dataclasses.replace(
        Stores.in_memory(),
        traces=InMemoryTraceStore(clock=clock),
        claims=InMemoryEventClaims(clock=clock),
        cooldowns=InMemoryCooldowns(clock=clock),
        slots=InMemoryRunSlots(clock=clock),
        usage=InMemoryUsageCounters(clock=clock),
    )


@asynccontextmanager
async def open_backend(
    name: str, *, redis: str | RedisTarget, prefix: str
) -> AsyncIterator[Backend]:
    """``name``'s backend; ``redis``: where its Redis is (a URL, or a cluster's target)."""
    if name in ("memory", "resilient(memory)"):
        yield _memory_backend(name)
        return
    from core.stores.redis import RedisRateBudget, RedisSearchCache

    here, there = (Stores.redis(redis, prefix=prefix) for _ in range(2))
    try:
        wrapped = name == "resilient(redis)"

        def budgets(limit: int, per: float) -> tuple[Budget, Budget]:
            shared = [
                RedisRateBudget(s.client, "m", limit=limit, per=per, prefix=prefix)
                for s in (here, there)
            ]
            if not wrapped:
                return shared[0], shared[1]
            a, b = (FallbackBudget(s, LocalBudget(limit, per)) for s in shared)
            return a, b

        yield Backend(
            name,
            here.resilient() if wrapped else here,
            there.resilient() if wrapped else there,
            asyncio.sleep,
            budgets,
            (
                RedisSearchCache(here.client, prefix=f"{prefix}search:"),
                RedisSearchCache(there.client, prefix=f"{prefix}search:"),
            ),
        )
    finally:
        await here.aclose()
        await there.aclose()


def _memory_backend(name: str) -> Backend:
    if name == "memory":
        clock = FakeClock()

        async def advance(seconds: float) -> None:
            clock.now += seconds
            await asyncio.sleep(0)

        def budgets(limit: int, per: float) -> tuple[Budget, Budget]:
            budget = LocalBudget(limit, per, clock=clock)
            return budget, budget

        stores, cache = _in_memory(clock), InMemorySearchCache(clock=clock)
        return Backend(name, stores, stores, advance, budgets, (cache, cache))

    def wrapped_budgets(limit: int, per: float) -> tuple[Budget, Budget]:
        budget = FallbackBudget(LocalBudget(limit, per), LocalBudget(limit, per))
        return budget, budget

    stores, cache = Stores.in_memory().resilient(), InMemorySearchCache()
    return Backend(name, stores, stores, asyncio.sleep, wrapped_budgets, (cache, cache))


async def heard(event: asyncio.Event, *, within: float = 5.0) -> None:
    """Wait for ``event`` (a subscriber heard something), failing after ``within``."""
    async with asyncio.timeout(within):
        await event.wait()
