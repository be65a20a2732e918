"""The ``schedule`` tool through a real Slack run (issue 44, item 2): the model proposes a
schedule, the asker approves it with the message's button, and the schedule is kept for the
asker in the question's channel; one the asker may not add (``schedule.who``) is refused
in the observation and nothing is kept. Over the real bolt app and Web API
client against the strict Slack fake, with the same harness as the approval tests."""

from __future__ import annotations

import json
from typing import Any

from adapters import words
from adapters.slack.approval import APPROVE_ACTION_ID
from core.schedule_tool import ScheduleTool
from core.schedules import InMemorySchedules, ScheduleBook, ScheduleSettings, Who
from tests.fakes.slack_server import TEAM_ID
from tests.integration.test_slack_app import ASKER, CHANNEL, eventually
from tests.integration.test_slack_approval import (  # noqa: F401
    ApprovalHarness,
    fake,
    make,
    thread_text,
    waiting,
)

WHEN = "every monday 09:00 Europe/Paris"
PROPOSE = (
    "Thought: The person wants this every week; I can schedule it.\n"
    f"Action: schedule[{json.dumps({'when': WHEN, 'question': 'What changed in #releases?'})}]"
)
DONE = "Thought: It is scheduled.\nAction: finish[Scheduled.]"


def offered(h: ApprovalHarness, *, who: Who = "anyone") -> ScheduleBook:
    """The schedule tool in the bot's tools, as ``serve`` adds it while schedules run."""
    settings = ScheduleSettings(default_timezone="UTC", who=who)
    book = ScheduleBook(InMemorySchedules(), settings)
    tool = ScheduleTool(book, say_added=words.schedule_added, say_refused=words.schedule_refused)
    h.bot.answering.agent.tools.add(tool)
    return book


async def test_a_proposed_schedule_is_kept_for_the_asker_here_once_they_approve(
    make: Any,  # noqa: F811
) -> None:
    h: ApprovalHarness = await make([PROPOSE, DONE])
    book = offered(h)
    await h.ask("Every Monday morning, tell me what changed in #releases")
    await eventually(waiting(h.fake))
    assert await book.listing() == [], "nothing is kept before the asker approves"
    assert await h.click(APPROVE_ACTION_ID, user=ASKER) == 200
    await eventually(lambda: len(h.model.calls) == 2)
    (kept,) = await book.listing()
    assert kept.owner == f"slack:{TEAM_ID}:{ASKER}"
    assert kept.place.platform == "slack" and kept.place.channel == CHANNEL
    assert kept.question == "What changed in #releases?"
    observation = str(h.model.calls[1].messages[-1]["content"])
    assert "⏰ Scheduled " in observation and "Next runs:" in observation


async def test_the_asker_must_be_allowed_to_add_schedules_here(make: Any) -> None:  # noqa: F811
    h: ApprovalHarness = await make([PROPOSE, DONE])
    book = offered(h, who="admins")  # the default: ASKER is no admin
    await h.ask("Every Monday morning, tell me what changed in #releases")
    await eventually(waiting(h.fake))
    assert await h.click(APPROVE_ACTION_ID, user=ASKER) == 200
    await eventually(lambda: len(h.model.calls) == 2)
    assert await book.listing() == []
    observation = str(h.model.calls[1].messages[-1]["content"])
    assert "Refused: " in observation
