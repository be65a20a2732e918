"""Runs each schedule's occurrences exactly once across every process (issue 44).

Every process runs a ``Scheduler``: every few seconds (``every``, plus up to ``jitter`` at
random, so processes do not look in step) it asks the store which schedules are due and, for
each, in random order::

    occurrence id = "schedule:{id}:{planned minute}"     (or "...:asked:{when}" for run ID)
    claims.claim(occurrence id)                           the platform events' once-only claim
    the winner hands the occurrence to the Runner         (as a task this scheduler owns)
    next time = when.next_after(now)                      written by compare-and-set: whoever
                                                          wins the claim or not, exactly one
                                                          write moves it on

A process that dies after its claim loses that occurrence (as a platform event claimed by a
dying process is lost), never runs it twice: the next process finds it claimed and only
moves the schedule on. Once the Runner has started the run, crash recovery is the run's own
(``adapters.recovery``).

After downtime only the latest missed occurrence runs, and only when it is at most
``catch_up_seconds`` old; it is marked late (more than ``LATE_AFTER`` behind). The others are
skipped, never run as a backlog. A run's outcome is recorded on the schedule; a failed run and
a failed post are counted apart, and ``PAUSE_AFTER`` failures in a row pause the schedule and
tell its owner (``Notice``).

A run the scheduler starts carries ``SCHEDULED`` (a context variable): the ``schedule`` tool
refuses to add a schedule from inside one, so a schedule can never make more of itself.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from core.errors import StoreUnavailable
from core.schedules import (
    LAST_RUNS,
    PAUSE_AFTER,
    Outcome,
    PastRun,
    Schedule,
    ScheduleBook,
)
from core.stores import EventClaims
from core.when import When

log = logging.getLogger(__name__)

LATE_AFTER = 60
"""Seconds behind its planned time past which a run is marked late."""
DUE_BATCH = 1000
"""Due schedules read per look; more wait for the next look."""
AT_ONCE = 8
"""Due schedules taken at once (their claims and writes overlap). Few: an occurrence claimed
by a process that dies before its run starts is lost, and the ones in that state at any
moment are at most this many (bench/schedules.py measured 43 lost in 4 kills aimed at the
first seconds of a minute with 50 at once)."""
BACKLOG_STEPS = 10_000
"""The most missed occurrences walked to find the latest (then it starts from the window)."""

SCHEDULED: ContextVar[str | None] = ContextVar("scheduled_occurrence", default=None)
"""The occurrence id while a scheduled run runs (in its task and every task it starts)."""

Counted = Outcome | Literal["skipped"]


@dataclass(frozen=True, slots=True)
class Occurrence:
    id: str
    schedule: Schedule
    planned: int
    """Its planned time (epoch seconds); for a run asked now, when it was asked."""
    started: float
    late: bool = False
    asked: bool = False
    """Asked now (``run ID``), not planned."""


class Runner(Protocol):
    """Runs one occurrence's question as a normal run in its schedule's place, posting the
    live message itself; says how it ended."""

    async def run(self, occurrence: Occurrence) -> Outcome: ...


class Notice(Protocol):
    """Tells a schedule's owner it was paused after ``PAUSE_AFTER`` failures in a row."""

    async def paused(self, schedule: Schedule) -> None: ...


def occurrence_id(schedule_id: str, planned: int, *, asked: bool = False) -> str:
    if asked:
        return f"schedule:{schedule_id}:asked:{planned}"
    return f"schedule:{schedule_id}:{planned // 60}"


class Scheduler:
    def __init__(
        self,
        *,
        book: ScheduleBook,
        claims: EventClaims,
        runner: Runner,
        notice: Notice,
        clock: Callable[[], float] = time.time,
        every: float = 5.0,
        jitter: float = 2.0,
        rng: random.Random | None = None,
        serves: Callable[[Schedule], bool] | None = None,
    ) -> None:
        self._book = book
        self._serves = serves
        """Whether this process runs a schedule now (the platforms it serves and has ready);
        None: every one. The others are left to the processes that serve them."""
        self._claims = claims
        self._runner = runner
        self._notice = notice
        self._clock = clock
        self._every = every
        self._jitter = jitter
        self._random = rng or random.Random()
        self._tasks: set[asyncio.Task[None]] = set()
        self.counts: Counter[Counted] = Counter()
        """Occurrences by outcome, and ``skipped`` backlogs, in this process."""
        self.lateness: list[Callable[[float], None]] = []
        """Told each run's seconds behind its planned time (the metrics' histogram)."""

    @property
    def catch_up(self) -> int:
        return self._book.settings.catch_up_seconds

    async def forever(self) -> None:
        """Look, then wait ``every`` plus jitter, until cancelled; a store that is away (or
        a look that failed) is logged and tried again at the next look."""
        while True:
            try:
                await self.tick()
            except StoreUnavailable as exc:
                log.warning("schedules: %s; looking again in a moment", exc)
            except Exception:  # a look that failed must not end every later one
                log.exception("schedules: a look failed; looking again in a moment")
            await asyncio.sleep(self._every + self._random.uniform(0, self._jitter))

    async def tick(self) -> list[Occurrence]:
        """One look: every due schedule taken care of; the occurrences this process won
        (their runs started as tasks, ``settled`` waits for them)."""
        now = self._clock()
        due = await self._book.store.due(now, limit=DUE_BATCH)
        if self._serves is not None:
            due = [s for s in due if self._serves(s)]
        self._random.shuffle(due)
        won: list[Occurrence] = []
        for start in range(0, len(due), AT_ONCE):
            batch = due[start : start + AT_ONCE]
            # Every take of the batch finishes (its claim and its write) before a failure is
            # raised: none is left running unowned.
            taken = await asyncio.gather(
                *(self._take(s, now) for s in batch), return_exceptions=True
            )
            for found in taken:
                if isinstance(found, BaseException):
                    raise found
                won.extend(found)
        return won

    async def settled(self) -> None:
        """Wait for the runs started so far."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.settled()

    async def _take(self, schedule: Schedule, now: float) -> list[Occurrence]:
        won = []
        if schedule.run_asked is not None and schedule.run_asked <= now:
            asked = await self._take_asked(schedule, schedule.run_asked, now)
            won += [asked] if asked else []
        if schedule.state == "active" and schedule.next_at is not None and schedule.next_at <= now:
            planned = await self._take_planned(schedule, schedule.next_at, now)
            won += [planned] if planned else []
        return won

    async def _take_asked(self, schedule: Schedule, asked: int, now: float) -> Occurrence | None:
        won = await self._claims.claim(occurrence_id(schedule.id, asked, asked=True))
        occurrence = None
        if won:
            occurrence = self._start(schedule, asked, now, late=False, asked=True)
        await self._book.update(
            schedule.id, lambda s: replace(s, run_asked=None) if s.run_asked == asked else None
        )
        return occurrence

    async def _take_planned(self, schedule: Schedule, first: int, now: float) -> Occurrence | None:
        planned, dropped = latest_due(schedule.when, first, now, window=self.catch_up)
        occurrence = None
        if planned is not None and await self._claims.claim(occurrence_id(schedule.id, planned)):
            late = now - planned > LATE_AFTER
            occurrence = self._start(schedule, planned, now, late=late, asked=False)
        following = schedule.when.next_after(now)
        moved = await self._book.update(
            schedule.id, lambda s: replace(s, next_at=following) if s.next_at == first else None
        )
        if moved is not None and dropped:
            self.counts["skipped"] += 1  # counted by the one process whose write moved it on
        return occurrence

    def _start(
        self, schedule: Schedule, planned: int, now: float, *, late: bool, asked: bool
    ) -> Occurrence:
        occurrence = Occurrence(
            occurrence_id(schedule.id, planned, asked=asked), schedule, planned, now, late, asked
        )
        task = asyncio.get_running_loop().create_task(
            self._run(occurrence), name=f"scheduled {occurrence.id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return occurrence

    async def _run(self, occurrence: Occurrence) -> None:
        if not occurrence.asked:
            for listener in self.lateness:
                listener(max(0.0, occurrence.started - occurrence.planned))
        SCHEDULED.set(occurrence.id)  # this task's own context: its children inherit it
        try:
            outcome = await self._runner.run(occurrence)
        except Exception:
            log.exception("schedules: the run of %s failed", occurrence.id)
            outcome = "run_failed"
        self.counts[outcome] += 1
        try:
            await self._record(occurrence, outcome)
        except StoreUnavailable as exc:
            log.warning("schedules: the outcome of %s was not saved: %s", occurrence.id, exc)

    async def _record(self, occurrence: Occurrence, outcome: Outcome) -> None:
        past = PastRun(occurrence.planned, int(occurrence.started), outcome, occurrence.late)
        schedule = occurrence.schedule
        updated = await self._book.update(schedule.id, lambda s: with_run(s, past))
        if updated is None:
            return
        if outcome != "ok" and updated.failures == PAUSE_AFTER and updated.state == "paused":
            await self._notice.paused(updated)
        if updated.next_at is None and updated.run_asked is None and updated.when.kind == "once":
            await self._book.delete(schedule.id)  # a one-off that has run is done


def with_run(schedule: Schedule, past: PastRun) -> Schedule:
    """``schedule`` with ``past`` remembered, its failures in a row counted, and paused at the
    ``PAUSE_AFTER``-th."""
    failures = 0 if past.outcome == "ok" else schedule.failures + 1
    state = "paused" if failures >= PAUSE_AFTER else schedule.state
    runs = (*schedule.runs, past)[-LAST_RUNS:]
    return replace(schedule, runs=runs, failures=failures, state=state)


def latest_due(when: When, first: int, now: float, *, window: int) -> tuple[int | None, bool]:
    """The occurrence to run for a schedule due since ``first``: the latest at or before
    ``now``, if it is at most ``window`` seconds old (None otherwise); and whether any
    earlier one is dropped."""
    start = first
    if now - first > window:  # long downtime: walk only the window
        after = when.next_after(now - window - 1)
        if after is None or after > now:
            return None, True
        start = after
    latest, steps = start, 0
    while (following := when.next_after(latest)) is not None and following <= now:
        latest, steps = following, steps + 1
        if steps >= BACKLOG_STEPS:  # pragma: no cover - the window bounds it first
            break
    if now - latest > window:
        return None, True
    return latest, latest != first


class RecordingRunner:
    """A ``Runner`` and ``Notice`` that keeps what it was given (tests, ``bench/schedules.py``
    before the surfaces run schedules): every occurrence, in order, answered with the next of
    ``outcomes`` (then ``ok``), and every schedule it was told was paused."""

    def __init__(self, outcomes: Sequence[Outcome] = ()) -> None:
        self.ran: list[Occurrence] = []
        self.paused_told: list[Schedule] = []
        self.scheduled_marks: list[str | None] = []
        self._outcomes = list(outcomes)

    async def run(self, occurrence: Occurrence) -> Outcome:
        self.ran.append(occurrence)
        self.scheduled_marks.append(SCHEDULED.get())
        return self._outcomes.pop(0) if self._outcomes else "ok"

    async def paused(self, schedule: Schedule) -> None:
        self.paused_told.append(schedule)
