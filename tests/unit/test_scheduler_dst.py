"""Daylight-saving transitions through the scheduler itself (issue 44), not only
``core.when``: two schedulers look every 5 s through the night of each change in
Europe/Paris and America/New_York, and a fixed time runs once (spring gap: at the first
minute after it; autumn overlap: the first time only), a ``*`` hour on real time, and an
interval always its real length apart, each occurrence taken by one scheduler."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from core.scheduler import RecordingRunner, Scheduler
from core.schedules import Added, InMemorySchedules, Place, ScheduleBook, ScheduleSettings
from core.stores import InMemoryEventClaims

LOOK = 5


async def night(when: str, start: datetime, hours: int) -> list[datetime]:
    """Every run of ``when`` added at ``start`` (UTC), looked for every ``LOOK`` seconds
    by two schedulers over ``hours``, in UTC; each occurrence checked to run once."""
    now = [start.timestamp()]
    book = ScheduleBook(InMemorySchedules(), ScheduleSettings(min_interval_seconds=60))
    claims = InMemoryEventClaims(ttl_seconds=900, clock=lambda: now[0])
    runners = [RecordingRunner(), RecordingRunner()]
    schedulers = [
        Scheduler(book=book, claims=claims, runner=r, notice=r, clock=lambda: now[0])
        for r in runners
    ]
    added = await book.add(
        owner="slack:T1:UADA",
        owner_name="@ada",
        place=Place("slack", "C1", space="T1"),
        when_text=when,
        question="what changed?",
        admin=True,
        now=now[0],
    )
    assert isinstance(added, Added), added
    for _ in range(hours * 3600 // LOOK):
        now[0] += LOOK
        for scheduler in schedulers:
            await scheduler.tick()
            await scheduler.settled()
    ran = [o for r in runners for o in r.ran]
    assert len({o.id for o in ran}) == len(ran), "an occurrence ran twice"
    assert not any(o.late for o in ran)
    return sorted(datetime.fromtimestamp(o.planned, UTC) for o in ran)


def local(moments: list[datetime], zone: str) -> list[str]:
    return [m.astimezone(ZoneInfo(zone)).strftime("%m-%d %H:%M %Z") for m in moments]


async def test_paris_spring_gap_runs_at_the_first_minute_after_it() -> None:
    ran = await night("30 2 * * * Europe/Paris", datetime(2026, 3, 28, 22, tzinfo=UTC), 30)
    assert local(ran, "Europe/Paris") == ["03-29 03:00 CEST", "03-30 02:30 CEST"]


async def test_paris_autumn_overlap_runs_a_fixed_time_once() -> None:
    ran = await night("30 2 * * * Europe/Paris", datetime(2026, 10, 24, 22, tzinfo=UTC), 6)
    assert local(ran, "Europe/Paris") == ["10-25 02:30 CEST"]


async def test_paris_autumn_overlap_runs_a_wildcard_hour_on_real_time() -> None:
    ran = await night("30 * * * * Europe/Paris", datetime(2026, 10, 24, 23, 45, tzinfo=UTC), 2)
    assert local(ran, "Europe/Paris") == ["10-25 02:30 CEST", "10-25 02:30 CET"]


@pytest.mark.parametrize(
    ("when", "start", "expected"),
    [
        ("every day 02:30 America/New_York", datetime(2026, 3, 8, 5, tzinfo=UTC),
         ["03-08 03:00 EDT"]),
        ("every day 01:00 America/New_York", datetime(2026, 11, 1, 4, tzinfo=UTC),
         ["11-01 01:00 EDT"]),
    ],
)  # fmt: skip
async def test_new_york_spring_gap_and_autumn_overlap(
    when: str, start: datetime, expected: list[str]
) -> None:
    assert local(await night(when, start, 4), "America/New_York") == expected


async def test_an_interval_stays_its_real_length_through_the_change() -> None:
    ran = await night("every 1 hours", datetime(2026, 10, 24, 23, 30, tzinfo=UTC), 4)
    assert [b - a for a, b in itertools.pairwise(ran)] == [ran[1] - ran[0]] * 3
    assert (ran[1] - ran[0]).total_seconds() == 3600
