"""``core.when``: the grammar of a schedule's ``when``, its next runs, and daylight saving in
Europe/Paris and America/New_York (cron's rules: a time in the spring gap runs at the first
minute after it; a time that happens twice in autumn runs once)."""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.when import MAX_WHEN_CHARS, When, WhenProblem, parse_when
from tests.hostile import hostile_text

NOW = datetime(2026, 12, 6, 8, 0, tzinfo=UTC).timestamp()


def when(text: str, *, tz: str | None = None, now: float = NOW) -> When:
    parsed = parse_when(text, default_timezone=tz, now=now)
    assert isinstance(parsed, When), parsed
    return parsed


def problem(text: str, *, tz: str | None = None, now: float = NOW) -> str:
    parsed = parse_when(text, default_timezone=tz, now=now)
    assert isinstance(parsed, WhenProblem), parsed
    return parsed.text


def local(runs: list[int], zone: str) -> list[str]:
    return [datetime.fromtimestamp(r, ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M %z") for r in runs]


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> float:
    return datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp()


# ---- the grammar ----------------------------------------------------------------------------


def test_a_cron_expression_with_its_zone_gives_the_next_three_runs() -> None:
    parsed = when("0 9 * * MON Europe/Paris")
    assert (parsed.kind, parsed.cron, parsed.timezone) == ("cron", "0 9 * * MON", "Europe/Paris")
    assert local(parsed.upcoming(NOW), "Europe/Paris") == [
        "2026-12-07 09:00 +0100",
        "2026-12-14 09:00 +0100",
        "2026-12-21 09:00 +0100",
    ]


def test_every_day_and_every_weekday_are_cron_at_a_wall_clock_time() -> None:
    daily = when("every day 09:00 Europe/Paris")
    assert (daily.cron, daily.text) == ("0 9 * * *", "every day 09:00 Europe/Paris")
    weekly = when("Every  Monday 9:05 Europe/Paris")
    assert (weekly.cron, weekly.text) == ("5 9 * * MON", "every monday 09:05 Europe/Paris")
    assert when("every fri 17:30 UTC").cron == "30 17 * * FRI"
    # NOW is 09:00 in Paris: the next run is strictly after it
    assert local(daily.upcoming(NOW, 2), "Europe/Paris") == [
        "2026-12-07 09:00 +0100",
        "2026-12-08 09:00 +0100",
    ]


def test_an_interval_counts_real_time_from_the_minute_it_was_added() -> None:
    every = when("every 2 hours", now=NOW + 17)
    assert (every.kind, every.every, every.text) == ("every", 7200, "every 2 hours")
    assert every.upcoming(NOW + 17) == [NOW + 7200, NOW + 14400, NOW + 21600]
    assert when("every minute").every == 60
    assert when("every 90 minutes").text == "every 90 minutes"
    assert every.timezone == ""  # not a wall-clock time: no zone needed


def test_in_and_at_run_once() -> None:
    soon = when("in 30 minutes", now=NOW + 5)
    assert (soon.kind, soon.start) == ("once", NOW + 30 * 60)
    assert soon.upcoming(NOW) == [NOW + 1800]
    assert soon.next_after(soon.start) is None
    eve = when("at 2026-12-24 18:00 Europe/Paris")
    assert local([eve.start], "Europe/Paris") == ["2026-12-24 18:00 +0100"]


def test_a_wall_clock_time_without_a_zone_takes_the_default_or_asks_for_one() -> None:
    assert when("every day 09:00", tz="America/New_York").text == "every day 09:00 America/New_York"
    assert when("0 9 * * *", tz="UTC").timezone == "UTC"
    for text in ("every day 09:00", "0 9 * * MON", "at 2026-12-24 18:00"):
        assert "Which time zone?" in problem(text)
    assert when("in 5 minutes").timezone == ""  # no wall clock, no question


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "When should it run?"),
        ("tomorrow", "cannot read"),
        ("every fortnight", "a number and minutes"),
        ("every 2 weeks", '"weeks" is not minutes'),
        ("every 0 minutes", "between 1 and"),
        ("in 99999 minutes", "between 1 and"),
        ("every day 25:00 UTC", "HH:MM"),
        ("every day 09:00 Mars/Olympus", "not a time zone I know"),
        ("every day 09:00 Europe/Paris please", "did not expect"),
        ("at 2026-02-30 10:00 UTC", "not a date"),
        ("at 2020-01-01 10:00 UTC", "already passed"),
        ("at 2099-01-01 10:00 UTC", "too far ahead"),
        ("61 * * * * UTC", "not valid"),
        ("0 0 30 2 * UTC", "not valid"),
        ("0 0 L * * UTC", "plain cron fields"),
        ("0 9 * * * * UTC", "5 fields"),
        ("x" * (MAX_WHEN_CHARS + 1), "too long"),
    ],
)
def test_each_problem_is_one_line_saying_what_to_write(text: str, says: str) -> None:
    said = problem(text)
    assert says in said
    assert "\n" not in said


def test_a_zone_given_back_never_pings_anyone() -> None:
    said = problem("every day 09:00 @everyone")
    assert "@everyone" not in said


def test_when_round_trips_through_its_stored_form() -> None:
    for text in ("0 9 * * MON Europe/Paris", "every 2 hours", "in 30 minutes"):
        parsed = when(text)
        assert When.from_dict(parsed.to_dict()) == parsed


def test_the_shortest_gap_is_what_the_minimum_interval_is_checked_against() -> None:
    assert when("*/5 * * * * UTC").shortest_gap(NOW) == 300
    assert when("0,1 9 * * * UTC").shortest_gap(NOW) == 60
    assert when("every 2 hours").shortest_gap(NOW) == 7200
    assert when("in 5 minutes").shortest_gap(NOW) is None


# ---- daylight saving ------------------------------------------------------------------------


def test_paris_spring_gap_runs_at_the_first_minute_after_it() -> None:
    # 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 does not exist that night.
    nightly = when("30 2 * * * Europe/Paris")
    runs = nightly.upcoming(utc(2026, 3, 27, 12, 0), 4)
    assert local(runs, "Europe/Paris") == [
        "2026-03-28 02:30 +0100",
        "2026-03-29 03:00 +0200",
        "2026-03-30 02:30 +0200",
        "2026-03-31 02:30 +0200",
    ]
    once = when("at 2026-03-29 02:30 Europe/Paris", now=utc(2026, 3, 1))
    assert local([once.start], "Europe/Paris") == ["2026-03-29 03:00 +0200"]


def test_paris_autumn_overlap_runs_a_fixed_time_once() -> None:
    # 2026-10-25: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    nightly = when("30 2 * * * Europe/Paris")
    runs = nightly.upcoming(utc(2026, 10, 24, 12, 0), 3)
    assert local(runs, "Europe/Paris") == [
        "2026-10-25 02:30 +0200",
        "2026-10-26 02:30 +0100",
        "2026-10-27 02:30 +0100",
    ]
    once = when("at 2026-10-25 02:30 Europe/Paris", now=utc(2026, 10, 1))
    assert local([once.start], "Europe/Paris") == ["2026-10-25 02:30 +0200"]


def test_paris_autumn_overlap_runs_a_wildcard_hour_on_real_time() -> None:
    # A * in the hour field follows real time, as cron does: both 02:00 and both 02:30.
    halfhourly = when("*/30 * * * * Europe/Paris")
    runs = halfhourly.upcoming(utc(2026, 10, 24, 23, 40), 5)
    assert local(runs, "Europe/Paris") == [
        "2026-10-25 02:00 +0200",
        "2026-10-25 02:30 +0200",
        "2026-10-25 02:00 +0100",
        "2026-10-25 02:30 +0100",
        "2026-10-25 03:00 +0100",
    ]
    assert [b - a for a, b in itertools.pairwise(runs)] == [1800] * 4


def test_new_york_spring_gap_and_autumn_overlap() -> None:
    # 2026-03-08: 02:00 EST becomes 03:00 EDT. 2026-11-01: 02:00 EDT goes back to 01:00 EST.
    spring = when("30 2 * * * America/New_York").upcoming(utc(2026, 3, 7, 12), 2)
    assert local(spring, "America/New_York") == [
        "2026-03-08 03:00 -0400",
        "2026-03-09 02:30 -0400",
    ]
    autumn = when("every day 01:00 America/New_York").upcoming(utc(2026, 10, 31, 12), 3)
    assert local(autumn, "America/New_York") == [
        "2026-11-01 01:00 -0400",
        "2026-11-02 01:00 -0500",
        "2026-11-03 01:00 -0500",
    ]


def test_a_daily_time_keeps_its_wall_clock_across_both_changes() -> None:
    daily = when("every day 09:00 America/New_York")
    march = local(daily.upcoming(utc(2026, 3, 7, 0), 2), "America/New_York")
    assert march == ["2026-03-07 09:00 -0500", "2026-03-08 09:00 -0400"]
    hours = [datetime.fromtimestamp(r, UTC).hour for r in daily.upcoming(utc(2026, 10, 31), 3)]
    assert hours == [13, 14, 14]  # 09:00 EDT, then 09:00 EST


def test_an_interval_ignores_daylight_saving() -> None:
    every = when("every 1 hour", now=utc(2026, 10, 24, 23, 30))
    runs = every.upcoming(utc(2026, 10, 24, 23, 30), 4)
    assert [b - a for a, b in itertools.pairwise(runs)] == [3600] * 3


# ---- properties -----------------------------------------------------------------------------

_PIECES = st.sampled_from(
    [
        "every",
        "in",
        "at",
        "day",
        "monday",
        "09:00",
        "2",
        "hours",
        "minutes",
        "*",
        "*/5",
        "0",
        "9",
        "MON",
        "Europe/Paris",
        "UTC",
        "2026-12-24",
        "18:00",
        "L",
        "#",
        "@here",
        "-",
        ",",
    ]
)


@given(st.one_of(hostile_text(), st.lists(_PIECES, max_size=9).map(" ".join)))
def test_any_text_gives_a_when_or_one_bounded_problem_line(text: str) -> None:
    started = time.perf_counter()
    parsed = parse_when(text, default_timezone=None, now=NOW)
    assert time.perf_counter() - started < 2.0
    if isinstance(parsed, WhenProblem):
        assert parsed.text and "\n" not in parsed.text and len(parsed.text) < 600
        assert "@here" not in parsed.text and "@everyone" not in parsed.text
    else:
        assert parsed.text and len(parsed.text) <= MAX_WHEN_CHARS
        first = parsed.next_after(NOW)
        assert first is not None and first > NOW


@given(
    minute=st.sampled_from(["*", "0", "*/15", "5,35", "10-20"]),
    hour=st.sampled_from(["*", "2", "0-3", "*/6", "9"]),
    day=st.sampled_from(["*", "1", "15", "*/10"]),
    weekday=st.sampled_from(["*", "MON", "1-5", "SUN"]),
    zone=st.sampled_from(["Europe/Paris", "America/New_York", "UTC"]),
    start=st.integers(int(utc(2026, 1, 1)), int(utc(2027, 12, 31))),
)
def test_runs_come_in_strictly_increasing_order_on_whole_minutes(
    minute: str, hour: str, day: str, weekday: str, zone: str, start: int
) -> None:
    parsed = when(f"{minute} {hour} {day} * {weekday} {zone}", now=start)
    runs = parsed.upcoming(start, 5)
    assert runs and runs[0] > start
    assert all(b > a for a, b in itertools.pairwise(runs))
    assert all(r % 60 == 0 for r in runs)
