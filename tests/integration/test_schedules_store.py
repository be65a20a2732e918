"""The schedule store and the book of changes over it, on memory and on a real Redis: limits
checked and the schedule added in one step, compare-and-set writes, the due index, and the
keys (no TTL, one hash slot, named in the operator's guide)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.schedules import (
    Added,
    InMemorySchedules,
    Place,
    Refused,
    ScheduleBook,
    ScheduleSettings,
    ScheduleStore,
)
from core.stores.redis import create_client
from core.stores.redis.schedules import SCHEDULE_KINDS, RedisSchedules

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 6, 8, 0, 30, tzinfo=UTC).timestamp()
GENERAL = Place("slack", "C1", space="T1")
RANDOM = Place("slack", "C2", space="T1")


@pytest.fixture(params=["memory", "redis"])
async def store(
    request: pytest.FixtureRequest, redis_url: str, redis_prefix: str
) -> AsyncIterator[ScheduleStore]:
    if request.param == "memory":
        yield InMemorySchedules()
        return
    prefix = redis_prefix
    client = create_client(redis_url)
    try:
        yield RedisSchedules(client, prefix=prefix)
    finally:
        await client.aclose()


def book_on(store: ScheduleStore, **settings: object) -> ScheduleBook:
    return ScheduleBook(store, ScheduleSettings(**settings))  # type: ignore[arg-type]


async def add(
    book: ScheduleBook,
    when: str = "every day 09:00 Europe/Paris",
    *,
    owner: str = "slack:T1:UADA",
    place: Place = GENERAL,
    admin: bool = True,
    question: str = "What changed in the releases channel?",
) -> Added | Refused:
    return await book.add(
        owner=owner,
        owner_name="@ada",
        place=place,
        when_text=when,
        question=question,
        admin=admin,
        now=NOW,
    )


async def test_an_added_schedule_is_kept_with_its_next_three_runs(store: ScheduleStore) -> None:
    book = book_on(store)
    added = await add(book, "0 9 * * MON Europe/Paris")
    assert isinstance(added, Added)
    assert [datetime.fromtimestamp(t, UTC).day for t in added.upcoming] == [7, 14, 21]
    kept = await store.get(added.schedule.id)
    assert kept == added.schedule
    assert kept.next_at == added.upcoming[0] and kept.state == "active"
    assert kept.when.timezone == "Europe/Paris" and kept.place == GENERAL


async def test_each_check_refuses_with_its_reason(store: ScheduleStore) -> None:
    book = book_on(store, min_interval_seconds=300, max_question_chars=50)
    assert await add(book, admin=False) == Refused("who")
    assert await add(book, question=" ") == Refused("question", 50)
    assert await add(book, question="x" * 51) == Refused("question", 50)
    assert await add(book, "*/2 * * * * UTC") == Refused("interval", 300)
    assert await add(book, "every 1 minute") == Refused("interval", 300)
    refused = await add(book, "every day 09:00")
    assert isinstance(refused, Refused) and refused.reason == "when"
    assert "Which time zone?" in refused.text
    assert await store.every() == []
    anyone = book_on(store, who="anyone", min_interval_seconds=60, default_timezone="UTC")
    assert isinstance(await add(anyone, "* * * * *", admin=False), Added)


async def test_a_place_and_a_person_have_their_limits(store: ScheduleStore) -> None:
    book = book_on(store, max_per_channel=3, max_per_user=2)
    assert isinstance(await add(book, owner="ada"), Added)
    assert isinstance(await add(book, owner="ada"), Added)
    assert await add(book, owner="ada") == Refused("per_user", 2)
    assert isinstance(await add(book, owner="bob"), Added)
    assert await add(book, owner="cy") == Refused("per_channel", 3)
    assert isinstance(await add(book, owner="cy", place=RANDOM), Added)
    # a deleted schedule frees its place and its owner's room
    first = next(s for s in await book.listing(GENERAL) if s.owner == "ada")
    assert await book.delete(first.id) == first
    assert await book.delete(first.id) is None
    assert isinstance(await add(book, owner="ada"), Added)


async def test_concurrent_adds_never_pass_the_limit(store: ScheduleStore) -> None:
    book = book_on(store, max_per_channel=20, max_per_user=1000)
    results = await asyncio.gather(*(add(book, owner=f"u{i}") for i in range(35)))
    assert sum(isinstance(r, Added) for r in results) == 20
    assert len(await book.listing(GENERAL)) == 20


async def test_pause_resume_and_run_now(store: ScheduleStore) -> None:
    book = book_on(store)
    added = await add(book)
    assert isinstance(added, Added)
    sid = added.schedule.id
    paused = await book.pause(sid)
    assert paused is not None and paused.state == "paused" and paused.version == 2
    assert await store.due(NOW + 10 * 86400, limit=10) == []  # a paused schedule is not due
    asked = await book.run_now(sid, now=NOW + 5)
    assert asked is not None and asked.run_asked == int(NOW + 5)
    assert [s.id for s in await store.due(NOW + 5, limit=10)] == [sid]  # paused, yet asked
    later = NOW + 3 * 86400
    resumed = await book.resume(sid, now=later)
    assert resumed is not None and resumed.state == "active" and resumed.failures == 0
    assert resumed.next_at == resumed.when.next_after(later)
    assert await book.pause("nope") is None


async def test_a_write_from_a_stale_read_loses(store: ScheduleStore) -> None:
    book = book_on(store)
    added = await add(book)
    assert isinstance(added, Added)
    stale = added.schedule
    assert await store.put(replace(stale, state="paused", version=stale.version + 1))
    assert not await store.put(replace(stale, failures=2, version=stale.version + 1))
    kept = await store.get(stale.id)
    assert kept is not None and kept.state == "paused" and kept.failures == 0
    assert not await store.put(replace(stale, id="gone", version=2))


async def test_due_lists_the_earliest_first_up_to_the_limit(store: ScheduleStore) -> None:
    book = book_on(store, default_timezone="UTC", max_per_channel=100, max_per_user=100)
    for when in ("every day 10:00", "every day 09:00", "every day 11:00"):
        assert isinstance(await add(book, when), Added)
    assert await store.due(NOW, limit=10) == []
    day_end = datetime(2026, 12, 6, 23, 0, tzinfo=UTC).timestamp()
    due = await store.due(day_end, limit=2)
    assert [datetime.fromtimestamp(s.due_at or 0, UTC).hour for s in due] == [9, 10]


async def test_redis_keys_persist_share_one_slot_and_are_documented(
    redis_url: str, redis_prefix: str
) -> None:
    client = create_client(redis_url)
    try:
        book = ScheduleBook(RedisSchedules(client, prefix=redis_prefix))
        assert isinstance(await add(book), Added)
        keys = [k async for k in client.scan_iter(match=redis_prefix + "*")]
        assert len(keys) == 5
        for key in keys:
            assert await client.ttl(key) == -1, key
            assert key.removeprefix(redis_prefix).split(":", 1)[0] in SCHEDULE_KINDS
        assert {k[k.index("{") : k.index("}") + 1] for k in keys} == {"{schedules}"}
    finally:
        await client.aclose()
    assert "`{prefix}schedules:{schedules}:" in (ROOT / "docs" / "operations.md").read_text()
