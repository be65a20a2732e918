"""``core.scheduler`` with a fake clock: each occurrence once across schedulers, catch-up
after downtime (one late run, never a backlog), failures counted apart and pausing at the
third, one-offs, runs asked now, and the mark a scheduled run carries."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.scheduler import (
    LATE_AFTER,
    SCHEDULED,
    Occurrence,
    RecordingRunner,
    Scheduler,
    latest_due,
    occurrence_id,
)
from core.schedules import (
    Added,
    InMemorySchedules,
    Outcome,
    Place,
    Schedule,
    ScheduleBook,
    ScheduleSettings,
)
from core.stores import InMemoryEventClaims
from core.when import When

START = datetime(2026, 12, 6, 8, 0, 0, tzinfo=UTC).timestamp()
PLACE = Place("slack", "C1", space="T1")


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class World:
    """One store and one set of claims (what every process shares), a clock, schedulers."""

    def __init__(self, **settings: object) -> None:
        defaults: dict[str, object] = {"min_interval_seconds": 60, "default_timezone": "UTC"}
        self.settings = ScheduleSettings(**(defaults | settings))  # type: ignore[arg-type]
        self.store = InMemorySchedules()
        self.book = ScheduleBook(self.store, self.settings)
        self.claims = InMemoryEventClaims(ttl_seconds=900, clock=self.clock_now)
        self.clock = Clock()

    def clock_now(self) -> float:
        return self.clock.now

    def scheduler(self, runner: RecordingRunner | None = None) -> Scheduler:
        runner = runner or RecordingRunner()
        return Scheduler(
            book=self.book, claims=self.claims, runner=runner, notice=runner, clock=self.clock
        )

    async def add(self, when: str, question: str = "today's top stories?") -> Schedule:
        added = await self.book.add(
            owner="slack:T1:UADA",
            owner_name="@ada",
            place=PLACE,
            when_text=when,
            question=question,
            admin=True,
            now=self.clock.now,
        )
        assert isinstance(added, Added), added
        return added.schedule


async def look(*schedulers: Scheduler) -> list[Occurrence]:
    won = []
    for scheduler in schedulers:
        won += await scheduler.tick()
        await scheduler.settled()
    return won


def minutes(found: list[Occurrence]) -> list[int]:
    return [int(o.planned - START) // 60 for o in found]


async def test_every_minute_runs_once_whichever_of_two_schedulers_looks() -> None:
    world = World()
    schedule = await world.add("* * * * *")
    a_runs, b_runs = RecordingRunner(), RecordingRunner()
    a, b = world.scheduler(a_runs), world.scheduler(b_runs)
    for minute in range(1, 6):
        for second in (1, 3, 4):  # both look several times within each minute
            world.clock.now = START + minute * 60 + second
            await look(a, b) if second != 3 else await look(b, a)
    ran = sorted(a_runs.ran + b_runs.ran, key=lambda o: o.planned)
    assert minutes(ran) == [1, 2, 3, 4, 5]
    assert {o.id for o in ran} == {occurrence_id(schedule.id, int(o.planned)) for o in ran}
    assert not any(o.late for o in ran)
    kept = await world.store.get(schedule.id)
    assert kept is not None and kept.next_at == START + 6 * 60
    assert [r.outcome for r in kept.runs] == ["ok"] * 5


async def test_a_claimed_occurrence_is_never_run_again_but_the_schedule_moves_on() -> None:
    # A process claimed minute 1 and died before anything else: the next one skips it.
    world = World()
    schedule = await world.add("* * * * *")
    assert await world.claims.claim(occurrence_id(schedule.id, int(START + 60)))
    runner = RecordingRunner()
    world.clock.now = START + 62
    assert await look(world.scheduler(runner)) == []
    kept = await world.store.get(schedule.id)
    assert kept is not None and kept.next_at == START + 120
    world.clock.now = START + 121
    assert minutes(await look(world.scheduler(runner))) == [2]


async def test_after_downtime_one_late_run_within_the_catch_up_never_a_backlog() -> None:
    world = World(catch_up_seconds=3600)
    schedule = await world.add("*/5 * * * *")
    runner = RecordingRunner()
    scheduler = world.scheduler(runner)
    world.clock.now = START + 47 * 60 + 30  # down from 08:00 to 08:47:30
    ran = await look(scheduler)
    assert minutes(ran) == [45]
    assert ran[0].late and ran[0].started - ran[0].planned == 150
    assert scheduler.counts == {"ok": 1, "skipped": 1}
    kept = await world.store.get(schedule.id)
    assert kept is not None and kept.next_at == START + 50 * 60 and kept.runs[-1].late


async def test_an_occurrence_older_than_the_catch_up_is_skipped() -> None:
    world = World(catch_up_seconds=3600)
    schedule = await world.add("every day 09:00")
    scheduler = world.scheduler()
    world.clock.now = START + 3 * 3600 + 5  # back at 11:00:05, 09:00 is two hours old
    assert await look(scheduler) == []
    assert scheduler.counts == {"skipped": 1}
    kept = await world.store.get(schedule.id)
    assert kept is not None
    assert kept.next_at == datetime(2026, 12, 7, 9, 0, tzinfo=UTC).timestamp()
    late = World(catch_up_seconds=3600)
    await late.add("every day 09:00")
    late.clock.now = START + 3600 + 1800  # back at 09:30: half an hour late, run once
    ran = await look(late.scheduler())
    assert len(ran) == 1 and ran[0].late


def test_latest_due_walks_only_the_window() -> None:
    every_minute = When(text="every 1 minute", kind="every", every=60, start=int(START))
    week_later = START + 7 * 86400 + 30
    latest, dropped = latest_due(every_minute, int(START), week_later, window=3600)
    assert latest == START + 7 * 86400 and dropped
    assert latest_due(every_minute, int(START), START + 10, window=3600) == (START, False)


@pytest.mark.parametrize("failing", ["run_failed", "post_failed"])
async def test_three_failures_in_a_row_pause_and_tell_the_owner(failing: Outcome) -> None:
    world = World()
    schedule = await world.add("* * * * *")
    other: Outcome = "post_failed" if failing == "run_failed" else "run_failed"
    runner = RecordingRunner([failing, "ok", failing, other, failing, failing])
    scheduler = world.scheduler(runner)
    for minute in range(1, 10):
        world.clock.now = START + minute * 60 + 1
        await look(scheduler)
    assert len(runner.ran) == 5  # ok resets the count; the 3rd failure in a row pauses it
    assert scheduler.counts == {failing: 3, other: 1, "ok": 1}
    kept = await world.store.get(schedule.id)
    assert kept is not None and kept.state == "paused" and kept.failures == 3
    assert [s.id for s in runner.paused_told] == [schedule.id]


async def test_a_runner_that_raises_is_a_failed_run() -> None:
    class Broken(RecordingRunner):
        async def run(self, occurrence: Occurrence) -> Outcome:
            raise RuntimeError("a bug in a surface")

    world = World()
    await world.add("* * * * *")
    scheduler = world.scheduler(Broken())
    world.clock.now = START + 61
    await look(scheduler)
    assert scheduler.counts == {"run_failed": 1}


async def test_a_one_off_runs_once_and_is_gone() -> None:
    world = World()
    schedule = await world.add("in 5 minutes")
    runner = RecordingRunner()
    scheduler = world.scheduler(runner)
    for minute in (4, 5, 6, 7):
        world.clock.now = START + minute * 60 + 2
        await look(scheduler)
    assert minutes(runner.ran) == [5]
    assert await world.store.get(schedule.id) is None


async def test_a_run_asked_now_runs_once_even_when_paused() -> None:
    world = World()
    schedule = await world.add("every day 09:00")
    await world.book.pause(schedule.id)
    runner = RecordingRunner()
    a, b = world.scheduler(runner), world.scheduler(runner)
    world.clock.now = START + 10
    await world.book.run_now(schedule.id, now=world.clock.now)
    world.clock.now = START + 12
    await look(a, b)
    world.clock.now = START + 3600 + 5  # 09:00: paused, so not run
    await look(a, b)
    assert [(o.asked, o.late) for o in runner.ran] == [(True, False)]
    kept = await world.store.get(schedule.id)
    assert kept is not None and kept.run_asked is None and kept.state == "paused"


async def test_a_scheduled_run_carries_its_mark_and_nothing_else_does() -> None:
    world = World()
    await world.add("* * * * *")
    runner = RecordingRunner()
    world.clock.now = START + 61
    ran = await look(world.scheduler(runner))
    assert runner.scheduled_marks == [ran[0].id]
    assert SCHEDULED.get() is None


async def test_lateness_is_told_for_each_planned_run() -> None:
    world = World()
    await world.add("* * * * *")
    scheduler = world.scheduler()
    told: list[float] = []
    scheduler.lateness.append(told.append)
    for second in (3, LATE_AFTER + 65):
        world.clock.now = START + 60 + second
        await look(scheduler)
    assert told == [3.0, 5.0]  # minute 1 at +3 s; then minute 3 (minute 2 skipped) at +5 s


async def test_a_store_that_fails_mid_look_is_raised_once_the_batch_is_done() -> None:
    from core.errors import StoreUnavailable

    broken: set[str] = set()

    class Flaky(InMemoryEventClaims):
        async def claim(self, event_id: str) -> bool:
            if any(f":{schedule_id}:" in event_id for schedule_id in broken):
                raise StoreUnavailable("Redis failed to claim the event")
            return await super().claim(event_id)

    world = World()
    healthy = await world.add("* * * * *")
    sick = await world.add("* * * * *")
    broken.add(sick.id)
    runner = RecordingRunner()
    scheduler = Scheduler(
        book=world.book, claims=Flaky(), runner=runner, notice=runner, clock=world.clock
    )
    world.clock.now = START + 61
    with pytest.raises(StoreUnavailable):
        await scheduler.tick()
    await scheduler.settled()
    assert [o.schedule.id for o in runner.ran] == [healthy.id], "the rest of the batch ran"
    kept = await world.store.get(healthy.id)
    assert kept is not None and kept.next_at == START + 120
