"""When a schedule runs: a 5-field cron expression with its time zone, or a phrase.

``parse_when(text, default_timezone=..., now=...)`` reads what a person typed and returns a
``When`` or a ``WhenProblem`` (one line saying what is wrong and how to write it). It does no
I/O and keeps no clock: ``now`` (epoch seconds) is given, and only ``in N minutes`` reads it.
The grammar (interface, docs/schedules.md)::

    0 9 * * MON Europe/Paris          cron: minute hour day-of-month month day-of-week, zone
    every day 09:00 Europe/Paris      daily at a wall-clock time
    every monday 09:00 Europe/Paris   weekly (monday ... sunday, or mon ... sun)
    every 2 hours                     every N minutes / hours / days, from now on
    in 30 minutes                     once, N minutes / hours / days from now
    at 2026-12-24 18:00 Europe/Paris  once, at that wall-clock time

Wall-clock times (cron, ``every day``, ``every monday``, ``at``) need a time zone: the one
written last, else ``default_timezone`` (``schedule.default_timezone``), else a problem that
asks for one. Intervals and ``in`` count real seconds and need none.

Cron expressions and the daily and weekly phrases (compiled to cron) are evaluated by cronsim,
which follows Debian cron's daylight-saving rules: a time that falls in the spring gap runs at
the first minute after it, a time that happens twice in autumn runs once (the first), and an
expression with a ``*`` in its minute or hour field runs on real time (so every real minute
that matches, both ambiguous half-hours included). ``at`` follows the same two rules.

Everything is bounded: the text (``MAX_WHEN_CHARS``), the numbers, and the search for the
next times (cronsim gives up after 50 years; a schedule that never runs is refused here).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MAX_WHEN_CHARS = 200
"""Longer text is refused at once (a schedule's ``when`` is a short line)."""
MAX_COUNT = 10_000
"""The largest N in ``every N ...`` / ``in N ...``."""
MAX_AHEAD_DAYS = 5 * 366
"""The furthest a one-off (``at`` / ``in``) may be."""

Kind = Literal["cron", "every", "once"]

UNITS = {"minute": 60, "hour": 3600, "day": 86400}
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_CRON_DAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")

_SPACES = re.compile(r"\s+")
_TIME = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_COUNT = re.compile(r"^\d{1,5}$")
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,\-]{1,40}$")
_ZONE = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+){0,2}$")

HOW = (
    'write a cron expression and a zone ("0 9 * * MON Europe/Paris") or a phrase: '
    '"every day 09:00 Europe/Paris", "every monday 09:00 Europe/Paris", "every 2 hours", '
    '"in 30 minutes", "at 2026-12-24 18:00 Europe/Paris"'
)


@dataclass(frozen=True, slots=True)
class When:
    """A parsed ``when``: ``text`` is its canonical spelling (the zone written out)."""

    text: str
    kind: Kind
    cron: str = ""
    """The 5-field expression (``kind == "cron"``, the daily and weekly phrases too)."""
    timezone: str = ""
    """The IANA zone of a wall-clock time; "" for intervals and ``in``."""
    every: int = 0
    """Seconds between two runs (``kind == "every"``)."""
    start: int = 0
    """Epoch seconds: the first run of an interval, or the one run of a one-off."""

    def next_after(self, after: float) -> int | None:
        """The first run strictly after ``after`` (epoch seconds), None when there is none
        (a one-off that has run)."""
        if self.kind == "once":
            return self.start if self.start > after else None
        if self.kind == "every":
            if self.start > after:
                return self.start
            periods = int((after - self.start) // self.every) + 1
            return self.start + periods * self.every
        return _next_cron(self.cron, self.timezone, after)

    def upcoming(self, after: float, count: int = 3) -> list[int]:
        """The next ``count`` runs after ``after``."""
        found: list[int] = []
        at: float = after
        while len(found) < count and (run := self.next_after(at)) is not None:
            found.append(run)
            at = run
        return found

    def shortest_gap(self, after: float, *, sample: int = 200) -> int | None:
        """The shortest time between two runs among the next ``sample`` (None for a
        one-off): what ``schedule.min_interval_seconds`` is checked against."""
        if self.kind == "once":
            return None
        if self.kind == "every":
            return self.every
        runs = self.upcoming(after, sample)
        gaps = [b - a for a, b in itertools.pairwise(runs)]
        return min(gaps) if gaps else None

    def to_dict(self) -> dict[str, object]:
        return {
            "text": self.text,
            "kind": self.kind,
            "cron": self.cron,
            "timezone": self.timezone,
            "every": self.every,
            "start": self.start,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> When:
        kind = str(data["kind"])
        if kind not in ("cron", "every", "once"):
            raise ValueError(f"unknown kind {kind[:20]!r}")
        return cls(
            text=str(data["text"]),
            kind=kind,  # type: ignore[arg-type]  # checked just above
            cron=str(data.get("cron", "")),
            timezone=str(data.get("timezone", "")),
            every=int(str(data.get("every", 0))),
            start=int(str(data.get("start", 0))),
        )


@dataclass(frozen=True, slots=True)
class WhenProblem:
    """Why a ``when`` cannot be read, as one line said to the person who wrote it."""

    text: str


def parse_when(text: str, *, default_timezone: str | None, now: float) -> When | WhenProblem:
    """``text`` as a ``When``, or the one problem that stops it (never raises)."""
    if len(text) > MAX_WHEN_CHARS:
        return WhenProblem(
            f"That is too long for a schedule ({MAX_WHEN_CHARS} characters at most): {HOW}."
        )
    words = _SPACES.split(text.strip())
    if not words or words == [""]:
        return WhenProblem(f"When should it run? {HOW}.")
    head = words[0].lower()
    if head == "every":
        return _every(words[1:], default_timezone, now)
    if head == "in":
        return _in(words[1:], now)
    if head == "at":
        return _at(words[1:], default_timezone, now)
    return _cron(words, default_timezone, now)


def _every(words: list[str], default_timezone: str | None, now: float) -> When | WhenProblem:
    first = words[0].lower() if words else ""
    if first == "day" or first in WEEKDAYS or first[:3] in _short_days():
        return _daily_or_weekly(first, words[1:], default_timezone, now)
    seconds = _duration(words, "every")
    if isinstance(seconds, WhenProblem):
        return seconds
    start = _minute_floor(now) + seconds
    return When(text=f"every {_spell(seconds)}", kind="every", every=seconds, start=start)


def _daily_or_weekly(
    day: str, rest: list[str], default_timezone: str | None, now: float
) -> When | WhenProblem:
    if day != "day" and day not in WEEKDAYS and day not in _short_days():
        return WhenProblem(f"{_quote(day)} is not a day: write day, or monday ... sunday.")
    if not rest or not (clock := _TIME.match(rest[0])):
        return WhenProblem('Give the time as HH:MM, e.g. "every day 09:00 Europe/Paris".')
    zone = _zone_of(rest[1:], default_timezone)
    if isinstance(zone, WhenProblem):
        return zone
    hour, minute = int(clock.group(1)), int(clock.group(2))
    dow = "*" if day == "day" else _CRON_DAYS[_weekday_index(day)]
    name = "day" if day == "day" else WEEKDAYS[_weekday_index(day)]
    when = When(
        text=f"every {name} {hour:02d}:{minute:02d} {zone}",
        kind="cron",
        cron=f"{minute} {hour} * * {dow}",
        timezone=zone,
    )
    return _runs_at_all(when, now)


def _in(words: list[str], now: float) -> When | WhenProblem:
    seconds = _duration(words, "in")
    if isinstance(seconds, WhenProblem):
        return seconds
    if seconds > MAX_AHEAD_DAYS * 86400:
        return WhenProblem(f"That is too far ahead: at most {MAX_AHEAD_DAYS} days.")
    start = _minute_floor(now + seconds)
    if start <= now:
        start += 60
    return When(text=f"in {_spell(seconds)}", kind="once", start=start)


def _at(words: list[str], default_timezone: str | None, now: float) -> When | WhenProblem:
    date = _DATE.match(words[0]) if words else None
    clock = _TIME.match(words[1]) if len(words) > 1 else None
    if date is None or clock is None:
        return WhenProblem(
            'Give the date and time as YYYY-MM-DD HH:MM, e.g. "at 2026-12-24 18:00 Europe/Paris".'
        )
    zone = _zone_of(words[2:], default_timezone)
    if isinstance(zone, WhenProblem):
        return zone
    try:
        local = datetime(
            int(date.group(1)),
            int(date.group(2)),
            int(date.group(3)),
            int(clock.group(1)),
            int(clock.group(2)),
            tzinfo=ZoneInfo(zone),
        )
    except ValueError:
        return WhenProblem(f"{words[0]} is not a date in the calendar.")
    start = int(_real(local).timestamp())
    if start <= now:
        return WhenProblem("That time has already passed: give one in the future.")
    if start - now > MAX_AHEAD_DAYS * 86400:
        return WhenProblem(f"That is too far ahead: at most {MAX_AHEAD_DAYS} days.")
    text = f"at {words[0]} {int(clock.group(1)):02d}:{clock.group(2)} {zone}"
    return When(text=text, kind="once", timezone=zone, start=start)


def _cron(words: list[str], default_timezone: str | None, now: float) -> When | WhenProblem:
    if len(words) < 5 or not all(_CRON_FIELD.match(w) for w in words[:5]):
        return WhenProblem(f"I cannot read {_quote(' '.join(words))} as a schedule: {HOW}.")
    if len(words) > 6:
        return WhenProblem(
            "A cron expression has 5 fields (minute hour day month weekday) and then a time zone."
        )
    zone = _zone_of(words[5:], default_timezone)
    if isinstance(zone, WhenProblem):
        return zone
    expression = " ".join(words[:5])
    from cronsim import CronSim, CronSimError  # loaded when a cron expression is first read

    if not _names_only(words[:5]):
        return WhenProblem(
            "Use plain cron fields: numbers, *, ranges (1-5), lists (1,3) and steps (*/15)."
        )
    try:
        CronSim(expression, datetime.fromtimestamp(now, UTC))
    except (CronSimError, ValueError, IndexError, KeyError) as exc:
        return WhenProblem(f"That cron expression is not valid ({_quote(str(exc))}): {HOW}.")
    when = When(text=f"{expression} {zone}", kind="cron", cron=expression, timezone=zone)
    return _runs_at_all(when, now)


def _runs_at_all(when: When, now: float) -> When | WhenProblem:
    from cronsim import CronSimError

    try:
        if when.next_after(now) is not None:
            return when
    except (CronSimError, ValueError, OverflowError):
        pass
    return WhenProblem("That schedule would never run: check the day and the month.")


def _names_only(fields: list[str]) -> bool:
    """Month and weekday names (JAN, WED...) are fine; cronsim's extensions (L, #, W) are not."""
    for field in fields:
        for token in re.split(r"[,\-/*]", field.upper()):
            if token and not token.isdigit() and token not in _MONTHS and token not in _CRON_DAYS:
                return False
    return True


_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")


def _duration(words: list[str], head: str) -> int | WhenProblem:
    example = f'"{head} 2 hours"' if head == "every" else f'"{head} 30 minutes"'
    if len(words) == 1 and words[0].lower().rstrip("s") in UNITS and head == "every":
        words = ["1", words[0]]
    if len(words) != 2 or not _COUNT.match(words[0]):
        return WhenProblem(f"Write a number and minutes, hours or days, e.g. {example}.")
    count, unit = int(words[0]), words[1].lower()
    singular = unit[:-1] if unit.endswith("s") else unit
    if singular not in UNITS:
        return WhenProblem(f"{_quote(words[1])} is not minutes, hours or days: e.g. {example}.")
    if not 1 <= count <= MAX_COUNT:
        return WhenProblem(f"The number must be between 1 and {MAX_COUNT:,}.")
    return count * UNITS[singular]


def _zone_of(words: list[str], default_timezone: str | None) -> str | WhenProblem:
    if len(words) > 1:
        return WhenProblem(f"I did not expect {_quote(' '.join(words[1:]))} after the time zone.")
    name = words[0] if words else default_timezone
    if not name:
        return WhenProblem(
            'Which time zone? Add one at the end, e.g. "Europe/Paris" or "UTC" '
            "(or set schedule.default_timezone)."
        )
    zone = zone_name(name)
    if zone is None:
        return WhenProblem(
            f"{_quote(name)} is not a time zone I know: write one like Europe/Paris, America/New_York or UTC."
        )
    return zone


def check_zone(value: str | None) -> str | None:
    """A config validator: ``value`` unless it names no time zone."""
    if value is not None and zone_name(value) is None:
        raise ValueError("must be an IANA time zone, e.g. Europe/Paris or UTC")
    return value


def zone_name(name: str) -> str | None:
    """``name`` as an IANA zone's key when it is one (``UTC`` included), else None."""
    if len(name) > 64 or not _ZONE.match(name) or ".." in name:
        return None
    try:
        return ZoneInfo(name).key
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def _next_cron(cron: str, timezone: str, after: float) -> int | None:
    from cronsim import CronSim

    start = datetime.fromtimestamp(int(after), UTC).astimezone(ZoneInfo(timezone))
    try:
        found = next(CronSim(cron, start))
    except StopIteration:
        return None
    return int(found.timestamp())


def _real(local: datetime) -> datetime:
    """``local`` if it exists; in the spring gap, the first minute after it (cron's rule). An
    ambiguous autumn time is its first occurrence (``fold=0``, the default)."""
    moved = local
    while moved.astimezone(UTC).astimezone(moved.tzinfo).replace(fold=0) != moved.replace(fold=0):
        moved += timedelta(minutes=1)
    return moved


def _minute_floor(seconds: float) -> int:
    return int(seconds) // 60 * 60


def _short_days() -> tuple[str, ...]:
    return tuple(day[:3] for day in WEEKDAYS)


def _weekday_index(day: str) -> int:
    return _short_days().index(day[:3])


def _spell(seconds: int) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}" + ("s" if count != 1 else "")
    return f"{seconds} seconds"  # pragma: no cover - durations are whole minutes


def _quote(text: str) -> str:
    """A piece of what the person typed, shown back short and inert."""
    shown = text if len(text) <= 40 else text[:39] + "…"
    return '"' + shown.replace("`", "'").replace("@", "@\u200b") + '"'
