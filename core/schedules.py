"""Scheduled questions (issue 44): what a schedule is, where it is kept, and the rules for
adding and changing one.

A ``Schedule`` is asked by the bot itself at the times its ``when`` gives (``core.when``), in
its ``place``, on its ``owner``'s behalf. ``ScheduleStore`` keeps them (``InMemorySchedules``
here, one process, gone at restart; ``core.stores.redis.schedules`` for every process on one Redis,
kept until deleted). A store does four plain things (add within the limits, read, replace a
record if nobody changed it since it was read, delete) and answers which are due;
``ScheduleBook`` is every change built on them, each a compare-and-set on the record's
``version``, so two processes (or a person and the scheduler) never lose each other's change.

Refusals are data (``Refused``); ``adapters.words`` says them. Only ``core.when``'s problems
come worded, as a parser's do.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from core.when import When, WhenProblem, parse_when

log = logging.getLogger(__name__)

State = Literal["active", "paused"]
Outcome = Literal["ok", "run_failed", "post_failed"]
"""How an occurrence ended: answered and posted; the run failed (the model, a tool, the
deadline); or the run ended but its message could not be posted."""
Who = Literal["admins", "anyone"]

LAST_RUNS = 10
"""Runs a schedule remembers (newest last)."""
PAUSE_AFTER = 3
"""Failures in a row that pause a schedule (its owner is told)."""
MAX_QUESTION_CHARS = 4000
ID_BYTES = 4
"""An id is this many random bytes in hex (8 characters): short enough to type."""
CAS_TRIES = 8


@dataclass(frozen=True, slots=True)
class Place:
    """Where a schedule posts: a platform's channel (Slack, Discord), chat (Telegram) or
    session (web), and a thread or forum topic in it when it has one."""

    platform: str
    channel: str
    thread: str = ""
    space: str = ""
    """The workspace or guild, where the platform has them."""

    @property
    def key(self) -> str:
        """One string per place: what ``schedule.max_per_channel`` counts by."""
        return ":".join(p for p in (self.platform, self.space, self.channel, self.thread) if p)


@dataclass(frozen=True, slots=True)
class PastRun:
    planned: int
    """The occurrence's planned time (epoch seconds)."""
    started: int
    outcome: Outcome
    late: bool = False
    """Run after downtime (``schedule.catch_up_seconds``), not at its time."""


@dataclass(frozen=True, slots=True)
class Schedule:
    id: str
    owner: str
    """Whose schedule it is, as every process knows a person (``slack:T1:U1``): their budgets
    pay for its runs, and they are told when it is paused."""
    owner_name: str
    """How the owner is shown (a mention or a name, as the surface rendered it)."""
    place: Place
    question: str
    when: When
    state: State = "active"
    next_at: int | None = None
    """The next planned run (epoch seconds); None for a one-off that has run."""
    run_asked: int | None = None
    """When someone asked for a run now (``run ID``), until a process takes it."""
    failures: int = 0
    """Failed runs in a row (a run or a post)."""
    runs: tuple[PastRun, ...] = ()
    created: int = 0
    version: int = 0
    """Bumped by every write: the compare-and-set token."""

    @property
    def timezone(self) -> str:
        return self.when.timezone

    @property
    def due_at(self) -> int | None:
        """When a process should next look at it: its next run while active, or a run asked
        now (paused or not); None when nothing is to come."""
        times = [self.run_asked] if self.run_asked is not None else []
        if self.state == "active" and self.next_at is not None:
            times.append(self.next_at)
        return min(times) if times else None

    def to_json(self) -> str:
        return json.dumps(
            {
                "id": self.id,
                "owner": self.owner,
                "owner_name": self.owner_name,
                "place": [
                    self.place.platform,
                    self.place.channel,
                    self.place.thread,
                    self.place.space,
                ],
                "question": self.question,
                "when": self.when.to_dict(),
                "state": self.state,
                "next_at": self.next_at,
                "run_asked": self.run_asked,
                "failures": self.failures,
                "runs": [[r.planned, r.started, r.outcome, r.late] for r in self.runs],
                "created": self.created,
                "version": self.version,
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Schedule | None:
        """The stored record, or None (logged) when it cannot be read."""
        try:
            data = json.loads(text)
            platform, channel, thread, space = (str(p) for p in data["place"])
            return cls(
                id=str(data["id"]),
                owner=str(data["owner"]),
                owner_name=str(data.get("owner_name", "")),
                place=Place(platform, channel, thread, space),
                question=str(data["question"]),
                when=When.from_dict(dict(data["when"])),
                state="paused" if data.get("state") == "paused" else "active",
                next_at=_int_or_none(data.get("next_at")),
                run_asked=_int_or_none(data.get("run_asked")),
                failures=int(data.get("failures", 0)),
                runs=tuple(_past_run(r) for r in data.get("runs") or ()),
                created=int(data.get("created", 0)),
                version=int(data.get("version", 0)),
            )
        except (ValueError, KeyError, TypeError, IndexError):
            log.warning("an unreadable schedule record was skipped")
            return None


def _int_or_none(value: object) -> int | None:
    return None if value is None else int(str(value))


def _past_run(row: Sequence[object]) -> PastRun:
    outcome = str(row[2])
    if outcome not in ("ok", "run_failed", "post_failed"):
        raise ValueError(outcome)
    return PastRun(int(str(row[0])), int(str(row[1])), outcome, bool(row[3]))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class ScheduleSettings:
    """``schedule.*`` in the config."""

    default_timezone: str | None = None
    who: Who = "admins"
    max_per_channel: int = 20
    max_per_user: int = 10
    min_interval_seconds: int = 300
    catch_up_seconds: int = 3600
    max_question_chars: int = MAX_QUESTION_CHARS


Reason = Literal["who", "per_channel", "per_user", "interval", "question", "when", "unknown"]


@dataclass(frozen=True, slots=True)
class Refused:
    """Why a schedule was not added or changed: ``limit`` is the number the reason names
    (20 schedules, 300 seconds...), ``text`` a parser's own line (reason ``when``)."""

    reason: Reason
    limit: int = 0
    text: str = ""


class ScheduleStore(Protocol):
    async def add(
        self, schedule: Schedule, *, max_per_place: int, max_per_owner: int
    ) -> Literal["per_channel", "per_user"] | None:
        """Keep ``schedule`` unless its place or its owner already has the most allowed
        (checked and added in one step); None when added."""
        ...

    async def get(self, schedule_id: str) -> Schedule | None: ...

    async def every(self) -> list[Schedule]:
        """Every schedule (a few thousand at most), in no order."""
        ...

    async def put(self, schedule: Schedule) -> bool:
        """Replace the record whose version is ``schedule.version - 1`` with ``schedule``;
        False when it changed meanwhile (or was deleted)."""
        ...

    async def delete(self, schedule_id: str) -> Schedule | None: ...

    async def due(self, now: float, *, limit: int) -> list[Schedule]:
        """Schedules whose ``due_at`` is ``now`` or earlier, earliest first."""
        ...


class InMemorySchedules:
    """``ScheduleStore`` for one process: nothing survives it (``serve`` says so). No await
    between a check and its write, so concurrent tasks cannot race."""

    def __init__(self) -> None:
        self._records: dict[str, Schedule] = {}

    async def add(
        self, schedule: Schedule, *, max_per_place: int, max_per_owner: int
    ) -> Literal["per_channel", "per_user"] | None:
        held = list(self._records.values())
        if sum(s.place.key == schedule.place.key for s in held) >= max_per_place:
            return "per_channel"
        if sum(s.owner == schedule.owner for s in held) >= max_per_owner:
            return "per_user"
        if schedule.id in self._records:
            raise ValueError(f"schedule {schedule.id} exists")
        self._records[schedule.id] = schedule
        return None

    async def get(self, schedule_id: str) -> Schedule | None:
        return self._records.get(schedule_id)

    async def every(self) -> list[Schedule]:
        return list(self._records.values())

    async def put(self, schedule: Schedule) -> bool:
        held = self._records.get(schedule.id)
        if held is None or held.version != schedule.version - 1:
            return False
        self._records[schedule.id] = schedule
        return True

    async def delete(self, schedule_id: str) -> Schedule | None:
        return self._records.pop(schedule_id, None)

    async def due(self, now: float, *, limit: int) -> list[Schedule]:
        found = [s for s in self._records.values() if s.due_at is not None and s.due_at <= now]
        return sorted(found, key=lambda s: s.due_at or 0)[:limit]


@dataclass(frozen=True, slots=True)
class Added:
    schedule: Schedule
    upcoming: tuple[int, ...]
    """The next three runs (epoch seconds), to say back."""


@dataclass(slots=True)
class ScheduleBook:
    """Every change to the schedules, over a store: adding within the limits, pausing,
    resuming, deleting, a run asked now, and the scheduler's own writes."""

    store: ScheduleStore
    settings: ScheduleSettings = field(default_factory=ScheduleSettings)
    new_id: Callable[[], str] = field(default=lambda: secrets.token_hex(ID_BYTES))

    async def add(
        self,
        *,
        owner: str,
        owner_name: str,
        place: Place,
        when_text: str,
        question: str,
        admin: bool,
        now: float,
    ) -> Added | Refused:
        """A new schedule, after the checks (who, the question, the ``when``, the interval,
        the limits), with its next three runs."""
        s = self.settings
        if s.who == "admins" and not admin:
            return Refused("who")
        question = question.strip()
        if not question or len(question) > s.max_question_chars:
            return Refused("question", s.max_question_chars)
        when = parse_when(when_text, default_timezone=s.default_timezone, now=now)
        if isinstance(when, WhenProblem):
            return Refused("when", text=when.text)
        gap = when.shortest_gap(now)
        if gap is not None and gap < s.min_interval_seconds:
            return Refused("interval", s.min_interval_seconds)
        schedule = Schedule(
            id=self.new_id(),
            owner=owner,
            owner_name=owner_name,
            place=place,
            question=question,
            when=when,
            next_at=when.next_after(now),
            created=int(now),
            version=1,
        )
        full = await self.store.add(
            schedule, max_per_place=s.max_per_channel, max_per_owner=s.max_per_user
        )
        if full is not None:
            return Refused(full, s.max_per_channel if full == "per_channel" else s.max_per_user)
        return Added(schedule, tuple(when.upcoming(now, 3)))

    async def listing(self, place: Place | None = None) -> list[Schedule]:
        """The schedules of ``place`` (every one when None), by id."""
        found = await self.store.every()
        if place is not None:
            found = [s for s in found if s.place.key == place.key]
        return sorted(found, key=lambda s: (s.created, s.id))

    async def pause(self, schedule_id: str) -> Schedule | None:
        return await self.update(schedule_id, lambda s: replace(s, state="paused"))

    async def resume(self, schedule_id: str, *, now: float) -> Schedule | None:
        """Active again, from its next time after ``now`` (what it missed is not run), its
        failures forgotten."""

        def resumed(s: Schedule) -> Schedule:
            return replace(s, state="active", failures=0, next_at=s.when.next_after(now))

        return await self.update(schedule_id, resumed)

    async def run_now(self, schedule_id: str, *, now: float) -> Schedule | None:
        """Ask for a run now: the next process to look takes it, once."""
        return await self.update(schedule_id, lambda s: replace(s, run_asked=int(now)))

    async def delete(self, schedule_id: str) -> Schedule | None:
        return await self.store.delete(schedule_id)

    async def update(
        self, schedule_id: str, change: Callable[[Schedule], Schedule | None]
    ) -> Schedule | None:
        """``change`` applied to the stored schedule, as a compare-and-set retried while
        another writer wins; None when it is gone or ``change`` returns None (nothing to
        do). Raises ``RuntimeError`` after ``CAS_TRIES`` lost races (a bug, not load)."""
        for _ in range(CAS_TRIES):
            held = await self.store.get(schedule_id)
            if held is None:
                return None
            changed = change(held)
            if changed is None:
                return None
            changed = replace(changed, version=held.version + 1)
            if await self.store.put(changed):
                return changed
        raise RuntimeError(f"schedule {schedule_id} kept changing under {CAS_TRIES} writes")
