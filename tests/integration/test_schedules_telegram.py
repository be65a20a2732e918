"""Scheduled questions on Telegram through the real client against the strict fake (issue
44): ``/schedule add "<when>" <question>`` by an admin of the group, the occurrence posted by
the bot itself as a new message (replying to nothing) headed "⏰ Scheduled by Ada · …" with no
mention entity, and ``/schedule list|pause|delete`` for its owner or an admin only."""

from __future__ import annotations

from typing import Any

from adapters import words
from adapters.dispatch.schedule import ScheduleDesk
from adapters.scheduled import ScheduledRuns
from adapters.telegram.schedule_command import ScheduleCommand
from adapters.telegram.scheduled import TelegramSchedules
from core.scheduler import Scheduler
from core.schedules import InMemorySchedules, ScheduleBook, ScheduleSettings
from core.stores.memory import InMemoryEventClaims
from tests.integration import test_telegram_bot
from tests.integration.test_telegram_bot import ALICE, BOB, GROUP, Harness
from tests.integration.test_telegram_settings import _reply

make = test_telegram_bot.make
"""The Telegram harness fixture (the real client, the bot, the strict fake)."""

START = 1_796_000_000.0
HOSTILE = "@everyone [x](https://evil) <b>bold</b>"


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def wired(h: Harness, clock: Clock) -> tuple[ScheduleBook, Scheduler]:
    book = ScheduleBook(
        InMemorySchedules(), ScheduleSettings(default_timezone="UTC", min_interval_seconds=60)
    )
    runs = ScheduledRuns()
    runs.add("telegram", TelegramSchedules(h.bot))
    ScheduleCommand(h.bot, ScheduleDesk(book, clock=clock)).install()
    scheduler = Scheduler(
        book=book,
        claims=InMemoryEventClaims(),
        runner=runs,
        notice=runs,
        clock=clock,
        serves=runs.serves,
    )
    return book, scheduler


async def test_a_group_admin_schedules_a_question_and_the_bot_posts_it_on_time(
    make: Any,
) -> None:
    h: Harness = await make(["Thought: ok.\nFinal Answer: tick one"], admins=frozenset({ALICE}))
    clock = Clock()
    book, scheduler = wired(h, clock)
    said = await _reply(
        h, h.fake.user_says(GROUP, f'/schedule add "every 1 minutes" {HOSTILE}', user=ALICE)
    )
    assert said.startswith("⏰ Scheduled ") and said.count(", ") >= 2, said
    (kept,) = await book.listing()
    assert kept.question == HOSTILE and kept.place.channel == str(GROUP)
    assert not kept.owner_name.startswith("@"), "a name, never @username (it would notify)"

    clock.now += 61
    assert len(await scheduler.tick()) == 1
    await scheduler.settled()
    await h.bot.answering.settled()
    posted = [m for m in h.fake.bot_messages(GROUP) if "Scheduled by" in m.text]
    assert len(posted) == 1, "posted once"
    message = posted[0]
    assert message.reply_to is None, "a new message, replying to nothing"
    assert "tick one" in message.text and HOSTILE in message.text, message.text
    assert not [e for e in message.entities if e["type"] in ("text_link", "mention")]
    assert scheduler.counts["ok"] == 1
    h.model.assert_complete()


async def test_only_an_admin_adds_and_only_the_owner_or_an_admin_changes(make: Any) -> None:
    h: Harness = await make([], admins=frozenset({ALICE}))
    book, _ = wired(h, Clock())
    refused = await _reply(h, h.fake.user_says(GROUP, '/schedule add "every 2 hours" hi', user=BOB))
    assert refused == "Only an admin can add a schedule here."
    await _reply(h, h.fake.user_says(GROUP, '/schedule add "every 2 hours" hi', user=ALICE))
    (kept,) = await book.listing()
    listed = await _reply(h, h.fake.user_says(GROUP, "/schedule list", user=BOB))
    assert kept.id in listed
    not_yours = await _reply(h, h.fake.user_says(GROUP, f"/schedule pause {kept.id}", user=BOB))
    assert not_yours == words.SCHEDULE_NOT_YOURS
    gone = await _reply(h, h.fake.user_says(GROUP, f"/schedule delete {kept.id}", user=ALICE))
    assert "Deleted" in gone and await book.listing() == []
    usage = await _reply(h, h.fake.user_says(GROUP, "/schedule nonsense", user=ALICE))
    assert usage.startswith("Usage: schedule add")


async def test_a_schedule_made_in_a_forum_topic_posts_in_that_topic(make: Any) -> None:
    """The topic it was asked in is where it posts (``schedule.place_of``, the same rule as
    the ``schedule`` tool's), not the group's general chat."""
    h: Harness = await make(["Thought: ok.\nFinal Answer: tock"], admins=frozenset({ALICE}))
    clock = Clock()
    book, scheduler = wired(h, clock)
    said = await _reply(
        h,
        h.fake.user_says(GROUP, '/schedule add "every 1 minutes" status?', user=ALICE, thread=77),
    )
    assert said.startswith("⏰ Scheduled "), said
    (kept,) = await book.listing()
    assert (kept.place.channel, kept.place.thread) == (str(GROUP), "77")

    clock.now += 61
    assert len(await scheduler.tick()) == 1
    await scheduler.settled()
    await h.bot.answering.settled()
    (posted,) = [m for m in h.fake.bot_messages(GROUP) if "Scheduled by" in m.text]
    assert posted.thread == 77 and "tock" in posted.text, (posted.thread, posted.text)
