"""A schedule's stored record and its lines: any record round-trips, any stored text reads as
a schedule or is skipped (never raises), and a listed line stays one bounded line whatever
the question holds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from adapters import words
from core.schedules import PastRun, Place, Refused, Schedule
from core.when import When
from tests.hostile import hostile_text

WHENS = [
    When(text="0 9 * * MON Europe/Paris", kind="cron", cron="0 9 * * MON", timezone="Europe/Paris"),
    When(text="every 2 hours", kind="every", every=7200, start=1_800_000_000),
    When(text="in 30 minutes", kind="once", start=1_800_001_800),
]

past_runs = st.builds(
    PastRun,
    planned=st.integers(0, 2**40),
    started=st.integers(0, 2**40),
    outcome=st.sampled_from(["ok", "run_failed", "post_failed"]),
    late=st.booleans(),
)
schedules = st.builds(
    Schedule,
    id=st.text(min_size=1, max_size=12),
    owner=st.text(max_size=40),
    owner_name=st.text(max_size=40),
    place=st.builds(Place, st.text(max_size=10), st.text(max_size=20), st.text(max_size=20)),
    question=hostile_text(),
    when=st.sampled_from(WHENS),
    state=st.sampled_from(["active", "paused"]),
    next_at=st.none() | st.integers(0, 2**40),
    run_asked=st.none() | st.integers(0, 2**40),
    failures=st.integers(0, 3),
    runs=st.lists(past_runs, max_size=10).map(tuple),
    created=st.integers(0, 2**40),
    version=st.integers(1, 2**31),
)


@given(schedules)
def test_every_schedule_round_trips_through_its_record(schedule: Schedule) -> None:
    assert Schedule.from_json(schedule.to_json()) == schedule


@given(st.one_of(hostile_text(), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_any_stored_text_reads_as_a_schedule_or_is_skipped(text: str) -> None:
    found = Schedule.from_json(text)
    assert found is None or isinstance(found, Schedule)


def test_a_record_with_a_wrong_field_is_skipped_not_raised() -> None:
    good = Schedule(
        id="a1b2c3d4",
        owner="slack:T1:UADA",
        owner_name="@ada",
        place=Place("slack", "C1"),
        question="q",
        when=WHENS[0],
        version=1,
    )
    text = good.to_json()
    assert Schedule.from_json(text.replace('"cron"', '"bogus"', 1)) is None
    assert Schedule.from_json(text.replace('"version": 1', '"version": "x"')) is None
    assert Schedule.from_json("[]") is None


@given(schedules)
def test_a_listed_schedule_is_one_bounded_line(schedule: Schedule) -> None:
    line = words.schedule_line(schedule)
    question_part = line.rsplit(" · “", 1)[1]
    assert len(question_part) <= words.QUESTION_SHOWN + 1
    if " · “" not in schedule.question:
        assert question_part.splitlines() == [question_part]


def test_refusals_and_changes_are_worded_once() -> None:
    assert (
        words.schedule_refused(Refused("interval", 300)) == "Runs must be at least 5 minutes apart."
    )
    assert (
        words.schedule_refused(Refused("interval", 90)) == "Runs must be at least 90 seconds apart."
    )
    assert "20 schedules" in words.schedule_refused(Refused("per_channel", 20))
    assert words.schedule_refused(Refused("when", text="Which time zone?")) == "Which time zone?"
    schedule = Schedule(
        id="a1b2c3d4",
        owner="slack:T1:UADA",
        owner_name="@ada",
        place=Place("slack", "C1"),
        question="q",
        when=WHENS[0],
        failures=3,
    )
    assert words.schedule_header(schedule, late=True) == (
        "⏰ Scheduled by @ada · 0 9 * * MON Europe/Paris · late"
    )
    assert "failed 3 times in a row" in words.schedule_paused_notice(schedule)
    assert words.run_time(1_796_630_400, "Europe/Paris") == "Mon 7 Dec 2026 09:00"


def test_a_time_past_any_calendar_date_is_said_not_raised() -> None:
    """A record's next run can be any integer (a store is not trusted): 2**40 s is past
    the year 9999, which ``datetime`` cannot hold."""
    assert words.run_time(2**40) == "a time past the year 9999"
    assert words.run_time(2**40, "Europe/Paris") == "a time past the year 9999"
    assert words.run_time(0) == "Thu 1 Jan 1970 00:00"
