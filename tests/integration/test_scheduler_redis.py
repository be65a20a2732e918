"""Schedulers of several processes on one real Redis (each its own client, as processes
have): every occurrence of many one-minute schedules runs exactly once while they look at
the same moments, and when one of them dies between two minutes."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from core.scheduler import RecordingRunner, Scheduler
from core.schedules import Added, Place, ScheduleBook, ScheduleSettings
from core.stores.redis import Client, RedisEventClaims, create_client
from core.stores.redis.schedules import RedisSchedules

START = datetime(2026, 12, 6, 8, 0, 0, tzinfo=UTC).timestamp()
SETTINGS = ScheduleSettings(
    min_interval_seconds=60, default_timezone="UTC", max_per_channel=100, max_per_user=100
)


@dataclass
class Process:
    client: Client
    book: ScheduleBook
    scheduler: Scheduler
    runner: RecordingRunner


class Clock:
    now = START

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def processes(
    redis_url: str, redis_prefix: str
) -> AsyncIterator[tuple[Clock, list[Process]]]:
    clock = Clock()
    made = []
    for _ in range(3):
        client = create_client(redis_url)
        book = ScheduleBook(RedisSchedules(client, prefix=redis_prefix), SETTINGS)
        claims = RedisEventClaims(client, prefix=redis_prefix, ttl_seconds=900)
        runner = RecordingRunner()
        scheduler = Scheduler(book=book, claims=claims, runner=runner, notice=runner, clock=clock)
        made.append(Process(client, book, scheduler, runner))
    try:
        yield clock, list(made)
    finally:
        for process in made:
            await process.scheduler.aclose()
            await process.client.aclose()


async def add_every_minute(process: Process, count: int) -> None:
    for i in range(count):
        added = await process.book.add(
            owner=f"slack:T1:U{i % 7}",
            owner_name="someone",
            place=Place("slack", f"C{i % 5}", space="T1"),
            when_text="* * * * *",
            question=f"question {i}",
            admin=True,
            now=START,
        )
        assert isinstance(added, Added)


async def look_together(processes: list[Process]) -> None:
    await asyncio.gather(*(p.scheduler.tick() for p in processes))
    await asyncio.gather(*(p.scheduler.settled() for p in processes))


async def test_many_schedules_each_minute_once_with_one_process_killed(
    processes: tuple[Clock, list[Process]],
) -> None:
    clock, every = processes
    alive = list(every)
    await add_every_minute(alive[0], 60)
    for minute in range(1, 5):
        if minute == 3:  # killed between minutes 2 and 3: it never looks again
            dead = alive.pop(0)
            await dead.client.aclose()
        for second in (1, 2):
            clock.now = START + minute * 60 + second
            await look_together(alive)
    ran = Counter((o.schedule.id, o.planned) for p in every for o in p.runner.ran)
    assert len(ran) == 60 * 4, "every schedule ran at every minute"
    assert set(ran.values()) == {1}, "and none twice"
    assert {o.planned for o in dead.runner.ran} <= {START + 60, START + 120}
