"""``/schedule add "<when>" <question>|list|pause ID|resume ID|delete ID|run ID`` on
Telegram: the shared handler (``adapters.dispatch.schedule``), said as a reply in the chat.

Its handler is added beside the bot's own (``install``) when ``serve`` runs schedules. An
admin is one of ``telegram.admins`` or, in a group, one of the chat's administrators. The
owner is named by their name, never ``@username`` (it would notify them at every run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from telegram import Update
from telegram.ext import CommandHandler, ContextTypes

from adapters import words
from adapters.dispatch import schedule
from adapters.dispatch.intents import Actor
from adapters.telegram.asker import Asker
from adapters.telegram.intents import where_of
from adapters.telegram.render import inert

if TYPE_CHECKING:
    from adapters.telegram.bot import TelegramBot

ROOM = 3500
"""Characters of a reply (Telegram takes 4,096 after entities are parsed)."""


class ScheduleCommand:
    def __init__(self, bot: TelegramBot, desk: schedule.ScheduleDesk) -> None:
        self.bot = bot
        self.desk = desk

    def install(self) -> None:
        self.bot.application.add_handler(CommandHandler("schedule", self.on_schedule))

    async def on_schedule(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        del context
        message, user = update.effective_message, update.effective_user
        if message is None or user is None:
            return
        thread = message.message_thread_id if message.is_topic_message else None
        asker = Asker(message.chat.id, user.id, message.message_id, thread)
        said = (message.text or "").partition(" ")[2]
        await self.bot.say_html(asker, await self.reply(asker, user.full_name, said))

    async def reply(self, asker: Asker, name: str, said: str) -> str:
        if (refused := await self.bot.refusal(asker)) is not None:
            return inert(refused)
        parsed = schedule.parse(said)
        if parsed is None:
            return inert(words.SCHEDULE_USAGE)
        admin = await self.bot.commands.is_admin(asker)
        user = str(asker.user)
        where = where_of(asker.chat, asker.thread)
        place = schedule.place_of(where)  # the chat, or the forum topic it was asked in
        assert place is not None  # Telegram posts
        intent = schedule.Schedule(
            event=f"telegram:{asker.chat}:{asker.message}",
            actor=Actor("telegram", user, f"telegram:{user}", name, admin=admin),
            where=where,
            place=place,
            # Telegram makes any "@word" in a message a mention: a name typed as one stays text
            shown_as=(name or "someone").replace("@", "@\u2060"),
            action=parsed.action,
            id=parsed.id,
            when=parsed.when,
            question=parsed.question,
        )
        return await self.desk.reply(intent, escape=inert, room=ROOM)
