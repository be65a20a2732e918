"""The in-memory ``Cooldowns`` and ``StopRequests`` (their bounds; what every backend does
alike is in ``tests/stores``), and their degrade-not-fail wrappers while the store is down."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from core.errors import StoreUnavailable
from core.stores import InMemoryCooldowns, InMemoryStopRequests, StopHandler
from core.stores.resilient import ResilientCooldowns, ResilientStopRequests, StoreHealth


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_expired_windows_are_forgotten_when_the_map_grows() -> None:
    clock = Clock()
    cooldowns = InMemoryCooldowns(clock=clock, max_keys=3)
    for i in range(3):
        await cooldowns.hit(f"old{i}", 1.0)
    clock.now += 2.0
    await cooldowns.hit("new", 10.0)
    assert set(cooldowns._until) == {"new"}


async def test_requests_reach_every_subscriber_while_subscribed() -> None:
    stops = InMemoryStopRequests()
    heard: list[tuple[str, str]] = []
    others: list[tuple[str, str]] = []
    async with stops.subscribe(lambda r, b, _: heard.append((r, b))):
        async with stops.subscribe(lambda r, b, _: others.append((r, b))):
            await stops.request("run1", by="ada")
        await stops.request("run2", by="bob")
    await stops.request("run3", by="eve")
    assert heard == [("run1", "ada"), ("run2", "bob")]
    assert others == [("run1", "ada")]


class DeadCooldowns:
    async def hit(self, key: str, seconds: float) -> float:
        raise StoreUnavailable("down")


class DeadStops:
    def __init__(self) -> None:
        self.subscribed = 0

    async def request(self, run_id: str, *, by: str, by_id: str = "") -> None:
        raise StoreUnavailable("down")

    @asynccontextmanager
    async def subscribe(self, handler: StopHandler) -> AsyncIterator[None]:
        self.subscribed += 1
        yield


async def test_cooldowns_fall_back_to_this_process_when_the_store_is_down() -> None:
    health = StoreHealth(retry_after=0)
    cooldowns = ResilientCooldowns(DeadCooldowns(), health=health)
    assert await cooldowns.hit("u", 30.0) == 0.0
    assert await cooldowns.hit("u", 30.0) > 29.0
    assert health.degraded


async def test_windows_the_store_grants_are_remembered_for_a_fallback() -> None:
    shared = InMemoryCooldowns()
    cooldowns = ResilientCooldowns(shared, health=StoreHealth(retry_after=0))
    assert await cooldowns.hit("u", 30.0) == 0.0
    cooldowns.inner = DeadCooldowns()  # the store dies mid-window
    assert await cooldowns.hit("u", 30.0) > 29.0


async def test_stop_requests_reach_this_process_when_the_store_is_down() -> None:
    inner = DeadStops()
    stops = ResilientStopRequests(inner, health=StoreHealth(retry_after=0))
    heard: list[tuple[str, str, str]] = []
    async with stops.subscribe(lambda r, b, i: heard.append((r, b, i))):
        await stops.request("run1", by="ada", by_id="1001")
    assert heard == [("run1", "ada", "1001")]  # the id travels beside the name
    assert inner.subscribed == 1


async def test_stop_requests_through_a_working_store_are_heard_once() -> None:
    shared = InMemoryStopRequests()  # stands in for Redis: it echoes to every subscriber
    stops = ResilientStopRequests(shared)
    heard: list[str] = []
    async with stops.subscribe(lambda r, b, _: heard.append(r)):
        await stops.request("run1", by="ada")
    assert heard == ["run1"]
