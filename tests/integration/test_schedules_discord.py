"""Scheduled questions on Discord through the real discord.py client against the strict
Discord fake (issue 44): ``/reactbot schedule add`` (a subcommand group) adds one, answered
privately with its next three runs; each occurrence is a normal run the bot posts itself as
a new message headed "⏰ Scheduled by @ada · …" (no mention allowed), its trace in a
thread; a place sees only its own schedules and only the owner or an admin changes one."""

from __future__ import annotations

from typing import Any

from adapters import words
from adapters.discord.scheduled import DiscordSchedules
from adapters.dispatch.intents import Where
from adapters.dispatch.schedule import ScheduleDesk, place_of
from adapters.scheduled import ScheduledRuns
from core.scheduler import Scheduler
from core.schedules import InMemorySchedules, ScheduleBook, ScheduleSettings
from core.stores.memory import InMemoryEventClaims
from tests.fakes.discord_server import BOT_ID, CHANNEL_ID, GUILD_ID, FakeDiscord
from tests.integration.test_discord import Harness, content_of, running

ADA, MALLORY = 1001, 2002
START = 1_796_000_000.0
HOSTILE = "@everyone <@2002> [x](https://evil.example) ```"


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
    runs.add("discord", DiscordSchedules(h.bot))
    h.bot.schedules = ScheduleDesk(book, clock=clock)
    scheduler = Scheduler(
        book=book,
        claims=InMemoryEventClaims(),
        runner=runs,
        notice=runs,
        clock=clock,
        serves=runs.serves,
    )
    return book, scheduler


async def command(
    h: Harness, sub: str, *, user: int = ADA, channel_id: int = CHANNEL_ID, **options: str
) -> str:
    """``/reactbot schedule SUB`` through discord.py: its ephemeral reply."""
    payload: dict[str, Any] = h.fake.interaction_create(
        "reactbot", author_id=user, user_name=f"u{user}", channel_id=channel_id
    )
    given = [{"name": k, "type": 3, "value": v} for k, v in options.items()]
    payload["data"]["options"] = [
        {"name": "schedule", "type": 2, "options": [{"name": sub, "type": 1, "options": given}]}
    ]
    h.fake.remember_interaction(payload)
    await h.fake.dispatch("INTERACTION_CREATE", payload)
    call = await h.fake.wait_for_call(
        lambda c: c.path.endswith("/callback") and f"/interactions/{payload['id']}/" in c.path
    )
    data = call.json["data"]
    assert data["flags"] & 64, "ephemeral"
    assert data["allowed_mentions"]["parse"] == []
    return str(data["content"])


async def test_an_admin_schedules_a_question_and_the_bot_posts_each_minute_once() -> None:
    turns = ["Thought: ok.\nAction: finish[tick one]", "Thought: ok.\nAction: finish[tick two]"]
    async with running(turns, admin_users=frozenset({str(ADA)})) as h:
        clock = Clock()
        book, scheduler = wired(h, clock)
        said = await command(h, "add", when="every 1 minutes", question=HOSTILE)
        assert said.startswith("⏰ Scheduled ") and said.count(", ") >= 2, said
        (kept,) = await book.listing()
        assert kept.place.channel == str(CHANNEL_ID) and kept.place.space == str(GUILD_ID)
        assert kept.owner == f"discord:{ADA}" and kept.owner_name == f"@u{ADA}"

        clock.now += 61
        assert len(await scheduler.tick()) == 1
        assert await scheduler.tick() == []
        await scheduler.settled()
        await h.finished(1)
        await h.settled()
        posted = [
            c
            for c in h.fake.calls_to("POST", f"/channels/{CHANNEL_ID}/messages")
            if "Scheduled by" in content_of(c)
        ]
        assert len(posted) == 1, "posted by the bot itself, once"
        first = posted[0].json
        assert "message_reference" not in first, "a new message, replying to nothing"
        assert first["allowed_mentions"]["parse"] == []
        edits = [c for c in h.fake.calls if c.method == "PATCH" and "tick one" in content_of(c)]
        final = content_of(edits[-1])
        assert f"⏰ Scheduled by @u{ADA} · every 1 minute" in final
        assert "<@2002>" not in final and "@everyone" not in final.replace("@\u200beveryone", "")
        assert scheduler.counts["ok"] == 1

        clock.now += 60
        await scheduler.tick()
        await scheduler.settled()
        await h.finished(2)
        h.model.assert_complete()


async def test_who_may_add_and_change_a_schedule_on_discord() -> None:
    async with running([], admin_users=frozenset({str(ADA)})) as h:
        book, _ = wired(h, Clock())
        refused = await command(h, "add", user=MALLORY, when="every 2 hours", question="hi")
        assert refused == "Only an admin can add a schedule here."
        await command(h, "add", when="every 2 hours", question="What changed?")
        (kept,) = await book.listing()
        assert kept.id in await command(h, "list")
        assert await command(h, "pause", user=MALLORY, id=kept.id) == words.SCHEDULE_NOT_YOURS
        assert "Paused" in await command(h, "pause", id=kept.id)
        assert "Deleted" in await command(h, "delete", id=kept.id)
        assert await command(h, "list") == words.SCHEDULES_NONE


async def test_a_schedule_made_in_a_thread_the_bot_opened_posts_where_place_of_says() -> None:
    """A thread the bot opened on an answer continues its channel's conversation: a schedule
    made there is the channel's (``schedule.place_of``), and posts in the channel."""
    fake, thread = FakeDiscord(), 4242
    fake.add_thread(thread)["owner_id"] = str(BOT_ID)  # the bot opened it on an answer
    async with running(["Thought: ok.\nAction: finish[tick]"], fake=fake,
                       admin_users=frozenset({str(ADA)})) as h:  # fmt: skip
        clock = Clock()
        book, scheduler = wired(h, clock)
        said = await command(h, "add", channel_id=thread, when="every 1 minutes", question="q")
        assert said.startswith("⏰ Scheduled "), said
        (kept,) = await book.listing()
        where = Where("discord", "bot_thread", str(CHANNEL_ID), space=str(GUILD_ID),
                      thread=str(thread))  # fmt: skip
        assert kept.place == place_of(where)
        assert kept.place.channel == str(CHANNEL_ID) and kept.place.thread == ""

        clock.now += 61
        assert len(await scheduler.tick()) == 1
        await scheduler.settled()
        await h.finished(1)
        await h.settled()
        posted = [c for c in h.fake.calls if c.method == "POST" and "Scheduled by" in content_of(c)]
        assert [c.path for c in posted] == [f"/channels/{CHANNEL_ID}/messages"], posted
        h.model.assert_complete()
