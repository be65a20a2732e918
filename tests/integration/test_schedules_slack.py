"""Scheduled questions on Slack through the real bolt app and Web API client against the
strict Slack fake (issue 44): ``/ask-settings schedule`` adds, lists and changes them, the
scheduler's occurrence is a normal run posted by the bot itself as a new root headed
"⏰ Scheduled by @ada · …" (no ``<@U…>``: nothing pings its owner), the trace in its thread,
the tokens counted to the owner; a refused or unpostable run is counted apart."""

from __future__ import annotations

import json
from typing import Any

from adapters import words
from adapters.dispatch.schedule import ScheduleDesk
from adapters.scheduled import ScheduledRuns
from adapters.slack.payloads import plain_text
from adapters.slack.scheduled import SlackSchedules
from core.scheduler import Scheduler
from core.schedules import InMemorySchedules, Refused, ScheduleBook, ScheduleSettings
from core.stores.memory import InMemoryEventClaims
from tests.fakes.slack_server import TEAM_ID, message_text
from tests.integration.test_slack_app import CHANNEL, Harness, fake, make  # noqa: F401

ADMIN = "UADMIN"
START = 1_796_000_000.0  # a Monday morning in 2026, on a minute boundary
HOSTILE = "@everyone <!channel> <@U0BOB> [x](https://evil) & <b>"


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def wired(h: Harness, clock: Clock, *, interval: int = 60) -> tuple[ScheduleBook, Scheduler]:
    settings = ScheduleSettings(default_timezone="UTC", min_interval_seconds=interval)
    book = ScheduleBook(InMemorySchedules(), settings)
    runs = ScheduledRuns()
    runs.add("slack", SlackSchedules(h.bot))
    h.bot.commands.schedules = ScheduleDesk(book, clock=clock)
    scheduler = Scheduler(
        book=book,
        claims=InMemoryEventClaims(),
        runner=runs,
        notice=runs,
        clock=clock,
        serves=runs.serves,
    )
    return book, scheduler


async def command(h: Harness, text: str, *, user: str = ADMIN) -> str:
    status, body, _ = await h.ask(f"schedule {text}", user=user, command="/ask-settings")
    assert status == 200
    reply: dict[str, Any] = json.loads(body)
    assert reply["response_type"] == "ephemeral"
    return str(reply["text"])


async def test_an_admin_adds_a_schedule_and_each_minute_is_posted_once_by_the_bot(
    make: Any,  # noqa: F811
) -> None:
    h: Harness = await make(
        ["Thought: easy.\nAction: finish[first tick]", "Thought: easy.\nAction: finish[tick 2]"],
        streaming="update",
    )
    clock = Clock()
    book, scheduler = wired(h, clock)

    said = await command(h, f'add "every 1 minutes" {HOSTILE}')
    assert said.startswith("⏰ Scheduled ") and said.count(":") >= 3, said
    assert "<!channel>" not in said and "<@U0BOB>" not in said
    (kept,) = await book.listing()
    assert kept.owner == f"slack:{TEAM_ID}:{ADMIN}" and kept.owner_name == "@ada"
    assert kept.place.channel == CHANNEL and kept.question == plain_text(HOSTILE)
    assert "Next runs:" in said and said.count(", ") >= 2, "the next three runs"

    assert await scheduler.tick() == [], "nothing is due before its minute"
    clock.now += 61
    (first,) = await scheduler.tick()
    assert await scheduler.tick() == [], "an occurrence is taken once"
    await scheduler.settled()
    await h.bot.settled()

    (root,) = h.fake.roots(CHANNEL)
    text = message_text(root)
    assert "Scheduled by @ada · every 1 minute" in text, text
    assert "first tick" in text
    shown = json.dumps(root.blocks) + json.dumps([c.args for c in h.fake.records])
    assert "<@UADMIN>" not in shown, "the owner is never pinged"
    assert "<!channel>" not in shown and "<@U0BOB>" not in shown
    assert h.fake.replies(CHANNEL, root.ts), "the trace is in the message's thread"
    assert scheduler.counts["ok"] == 1
    (ran,) = (await book.listing())[0].runs
    assert ran.outcome == "ok" and not ran.late
    assert first.id.startswith(f"schedule:{kept.id}:")

    clock.now += 60
    await scheduler.tick()
    await scheduler.settled()
    await h.bot.settled()
    assert len(h.fake.roots(CHANNEL)) == 2 and "tick 2" in message_text(h.fake.roots(CHANNEL)[1])
    h.model.assert_complete()


async def test_who_may_add_and_change_and_what_a_place_sees(make: Any) -> None:  # noqa: F811
    h: Harness = await make([], streaming="update")
    clock = Clock()
    book, _ = wired(h, clock, interval=120)

    refused = await command(h, 'add "every 2 hours" hi', user="U0BOB")
    assert refused == words.schedule_refused(Refused("who"))
    assert "apart" in await command(h, 'add "every 1 minutes" hi'), "the interval"
    said = await command(h, 'add "every 2 hours" What changed?')
    (kept,) = await book.listing()
    assert kept.id in said
    listed = await command(h, "list")
    assert kept.id in listed and "What changed?" in listed
    assert await command(h, f"pause {kept.id}", user="U0BOB") == words.SCHEDULE_NOT_YOURS
    assert "Paused" in await command(h, f"pause {kept.id}")
    assert (await book.store.get(kept.id)).state == "paused"  # type: ignore[union-attr]
    assert "Resumed" in await command(h, f"resume {kept.id}")
    assert "will run" in await command(h, f"run {kept.id}")
    assert "No schedule" in await command(h, "delete nope")
    assert "Deleted" in await command(h, f"delete {kept.id}")
    assert await command(h, "list") == words.SCHEDULES_NONE
    assert "Usage" in await command(h, "add every day hi"), "the when is quoted"
