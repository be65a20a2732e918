"""Discord's port for scheduled questions (``adapters.scheduled``): a new message in the
schedule's channel or thread (no message of anyone's to reply to), followed like any
answer's, its trace in its thread. Sent with no mentions allowed, as every message here.
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import discord

from adapters.discord.access import Asker
from adapters.discord.cog import QUIET, AskCog, Live, _Reply
from adapters.discord.render import fit, sanitize
from adapters.discord.translate import category_of
from adapters.dispatch.checks import Admitted
from adapters.dispatch.handlers.ask import Answering, Reply
from adapters.dispatch.intents import PlaceKind, Where
from adapters.live import RunView, Verbosity
from adapters.scheduled import owner_id
from core.agent import Run
from core.schedules import Schedule

if TYPE_CHECKING:
    from adapters.discord.client import ReactBot

log = logging.getLogger(__name__)


def _id(text: str) -> int:
    return int(text) if text.isdigit() else 0


class DiscordSchedules:
    """``SchedulePort`` of one Discord bot (its cog exists once the bot has logged in)."""

    def __init__(self, bot: ReactBot) -> None:
        self.bot = bot

    @property
    def cog(self) -> AskCog:
        cog = self.bot.cog
        if cog is None:  # ``ready`` is asked first
            raise RuntimeError("the Discord bot is not connected yet")
        return cog

    @property
    def answering(self) -> Answering[Asker]:
        return self.cog.answering

    @property
    def ready(self) -> bool:
        cog = self.bot.cog
        return cog is not None and self.bot.is_ready() and not cog.answering.closing

    def asker(self, schedule: Schedule) -> tuple[Asker, str]:
        place = schedule.place
        guild = _id(place.space) or None
        return Asker(_id(owner_id(schedule)), guild_id=guild), f"discord:{place.channel}"

    def where(self, schedule: Schedule) -> Where:
        """A guild's channel (a thread in it), or a DM; the category as the cache knows it."""
        place = schedule.place
        channel = self.bot.get_channel(_id(place.channel))
        category = category_of(channel) if channel is not None else None
        kind: PlaceKind = "dm" if not place.space else "thread" if place.thread else "channel"
        return Where(
            "discord",
            kind,
            place.channel,
            space=place.space or None,
            thread=place.thread or None,
            category=category,
        )

    def reply(self, schedule: Schedule, ask: Admitted[Asker], header: str) -> Reply:
        place = schedule.place
        return ScheduledReply(self.cog, ask, _id(place.thread or place.channel), header)

    async def say(self, schedule: Schedule, text: str) -> None:
        place = schedule.place
        channel_id = _id(place.thread or place.channel)
        try:
            channel = await self._channel(channel_id)
            await channel.send(fit(sanitize(text)), **QUIET)
        except (discord.HTTPException, TypeError) as exc:
            log.warning("could not post in %s for schedule %s: %s", channel_id, schedule.id, exc)

    async def _channel(self, channel_id: int) -> Any:
        return self.bot.get_channel(channel_id) or await self.bot.fetch_channel(channel_id)


class ScheduledReply(_Reply):
    """An answer nobody asked in the channel: posted as a new message, headed by the
    schedule's header (the live message's first lines, ``render.heard_lines``)."""

    def __init__(self, cog: AskCog, ask: Admitted[Asker], channel_id: int, header: str) -> None:
        super().__init__(cog, ask, channel_id)
        self.header = header
        self.channel: Any = None

    async def open(self, verbosity: Verbosity) -> str | None:
        del verbosity
        bot = self.cog.bot
        try:
            channel = bot.get_channel(self.channel_id) or await bot.fetch_channel(self.channel_id)
        except discord.HTTPException as exc:
            log.warning("could not find channel %s for a scheduled run: %s", self.channel_id, exc)
            return None
        if not isinstance(channel, discord.abc.Messageable):
            return None
        self.channel = channel
        return self.cog._conversation_at(channel, self.channel_id)

    def reading(self) -> AbstractAsyncContextManager[object]:
        return contextlib.nullcontext()

    async def show(self, run: Run, view: RunView) -> Live | None:
        first, controls = self.cog._first(run, self.ask.who, view.question)
        try:
            async with self.cog.pacer.slot(str(self.channel_id), priority="first"):
                if isinstance(controls, discord.ui.LayoutView):  # a card carries no content
                    message = await self.channel.send(view=controls, **QUIET)
                else:
                    head = fit(sanitize(self.header))
                    content = fit(f"{head}\n{first.content}")
                    message = await self.channel.send(content, view=controls, **QUIET)
        except discord.HTTPException:
            log.exception("could not post a scheduled run in channel %s", self.channel_id)
            return None
        return self._shown(run, message, view, controls)

    async def note(self, text: str) -> None:
        await self.cog._say(self.channel_id, self.channel.send(text, **QUIET))
