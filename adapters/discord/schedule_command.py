"""``/reactbot schedule add|list|pause|resume|delete|run``: the shared schedule command
(``adapters.dispatch.schedule``) on Discord, answered ephemerally.

A subcommand group of ``/reactbot`` (``REACTBOT``, declared in ``memory_command``), mixed
into the cog as ``MemoryCommand`` is: ``ReactbotCommands`` is both. The handler is the
bot's while ``serve`` runs schedules (``ReactBot.schedules``); the owner is named with
their display name as plain text, and every message goes with no mentions allowed.
"""

from __future__ import annotations

from typing import Protocol, cast

import discord
from discord import app_commands
from discord.ext import commands

from adapters import words
from adapters.discord.access import Asker
from adapters.discord.memory_command import REACTBOT, MemoryCommand
from adapters.discord.render import CONTENT_LIMIT, fit, sanitize
from adapters.discord.surface import NO_MENTIONS
from adapters.discord.translate import where_of
from adapters.dispatch import schedule
from adapters.dispatch.intents import Actor

__all__ = ["REACTBOT", "SCHEDULE", "ReactbotCommands", "ScheduleCommand"]

SCHEDULE = app_commands.Group(
    name="schedule", description="Questions I ask here on my own, on time.", parent=REACTBOT
)


class _HasDesk(Protocol):
    schedules: schedule.ScheduleDesk | None
    user: discord.ClientUser | None


class _Cog(Protocol):
    """What the command needs of the cog that carries it."""

    @property
    def bot(self) -> _HasDesk: ...

    async def _admit(self, interaction: discord.Interaction) -> Asker | None: ...

    def _actor(self, user: discord.User | discord.Member, asker: Asker) -> Actor: ...


class ScheduleCommand(commands.Cog):
    """The ``/reactbot schedule`` subcommands, mixed into the cog."""

    @SCHEDULE.command(name="add", description="Ask a question here on a schedule.")
    @app_commands.describe(
        when='"every monday 09:00 Europe/Paris", "every 2 hours", "in 30 minutes", a cron…',
        question="What to ask each time",
    )
    async def schedule_add(
        self, interaction: discord.Interaction, when: str, question: str
    ) -> None:
        await self._schedule(interaction, schedule.Parsed("add", when=when, question=question))

    @SCHEDULE.command(name="list", description="The schedules of this channel.")
    async def schedule_list(self, interaction: discord.Interaction) -> None:
        await self._schedule(interaction, schedule.Parsed("list"))

    @SCHEDULE.command(name="pause", description="Pause a schedule (its owner or an admin).")
    async def schedule_pause(self, interaction: discord.Interaction, id: str) -> None:
        await self._schedule(interaction, schedule.Parsed("pause", id=id))

    @SCHEDULE.command(name="resume", description="Resume a paused schedule.")
    async def schedule_resume(self, interaction: discord.Interaction, id: str) -> None:
        await self._schedule(interaction, schedule.Parsed("resume", id=id))

    @SCHEDULE.command(name="delete", description="Delete a schedule.")
    async def schedule_delete(self, interaction: discord.Interaction, id: str) -> None:
        await self._schedule(interaction, schedule.Parsed("delete", id=id))

    @SCHEDULE.command(name="run", description="Ask a schedule's question now.")
    async def schedule_run(self, interaction: discord.Interaction, id: str) -> None:
        await self._schedule(interaction, schedule.Parsed("run", id=id))

    async def _schedule(self, interaction: discord.Interaction, parsed: schedule.Parsed) -> None:
        cog = cast(_Cog, self)
        asker = await cog._admit(interaction)
        if asker is None:
            return
        desk = cog.bot.schedules
        text = words.SCHEDULES_OFF
        if desk is not None:
            text = await desk.reply(self._intent(interaction, asker, parsed), escape=sanitize,
                                    room=CONTENT_LIMIT)  # fmt: skip
        await interaction.response.send_message(
            fit(text), ephemeral=True, allowed_mentions=NO_MENTIONS, suppress_embeds=True
        )

    def _intent(
        self, interaction: discord.Interaction, asker: Asker, parsed: schedule.Parsed
    ) -> schedule.Schedule:
        cog = cast(_Cog, self)
        me = cog.bot.user
        channel_id = interaction.channel_id or 0
        where = where_of(interaction.channel, channel_id, bot_id=me.id if me else 0)
        actor = cog._actor(interaction.user, asker)
        place = schedule.place_of(where)  # a thread the bot opened posts in its channel
        assert place is not None  # Discord posts
        return schedule.Schedule(
            event=f"discord:interaction:{interaction.id}",
            actor=actor,
            where=where,
            place=place,
            shown_as=f"@{actor.name}",  # plain text, sent with no mentions allowed
            action=parsed.action,
            id=parsed.id,
            when=parsed.when,
            question=parsed.question,
        )


class ReactbotCommands(ScheduleCommand, MemoryCommand):
    """Every ``/reactbot`` subcommand kept outside the cog's module."""
