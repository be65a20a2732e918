"""Telegram's port for scheduled questions (``adapters.scheduled``): a new message in the
schedule's chat (and forum topic), replying to nothing, followed like any answer's.

The header names the owner by their name, never ``@username``: a username in a message
the bot posts on its own would notify them at every run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.dispatch.checks import Admitted
from adapters.dispatch.handlers.ask import Answering, Reply
from adapters.dispatch.intents import Where
from adapters.scheduled import owner_id
from adapters.telegram.asker import Asker
from adapters.telegram.bot import TelegramReply
from adapters.telegram.intents import where_of
from core.schedules import Schedule

if TYPE_CHECKING:
    from adapters.telegram.bot import TelegramBot


def _id(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def asker_of(schedule: Schedule) -> Asker:
    """The owner in the schedule's chat and topic, asking no message of theirs."""
    place = schedule.place
    return Asker(
        chat=_id(place.channel) or 0,
        user=_id(owner_id(schedule)) or 0,
        message=0,
        thread=_id(place.thread) if place.thread else None,
    )


class TelegramSchedules:
    """``SchedulePort`` of one Telegram bot."""

    def __init__(self, bot: TelegramBot) -> None:
        self.bot = bot

    @property
    def answering(self) -> Answering[Asker]:
        return self.bot.answering

    @property
    def ready(self) -> bool:
        return self.bot.application.running and not self.answering.closing

    def asker(self, schedule: Schedule) -> tuple[Asker, str]:
        return asker_of(schedule), f"telegram:{schedule.place.channel}"

    def where(self, schedule: Schedule) -> Where:
        asker = asker_of(schedule)
        return where_of(asker.chat, asker.thread)

    def reply(self, schedule: Schedule, ask: Admitted[Asker], header: str) -> Reply:
        del schedule, header  # the header is put on the run's view (``adapters.scheduled``)
        return TelegramReply(self.bot, ask.who)

    async def say(self, schedule: Schedule, text: str) -> None:
        await self.bot.say(asker_of(schedule), text)
