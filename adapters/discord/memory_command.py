"""``/reactbot memory``: the shared memory command (``adapters.dispatch.memory``) on
Discord, answered ephemerally (only the person sees it, in a channel or a DM).

Here, not in ``cog.py``: ``REACTBOT``, the ``/reactbot`` group, is declared here and the
cog takes it (``AskCog.reactbot``) with this mixin's subcommand, which discord.py copies to
each cog bound to it, as it does the group's other subcommands.
"""

from __future__ import annotations

from typing import Protocol, cast

import discord
from discord import app_commands
from discord.ext import commands

from adapters.discord.access import Asker
from adapters.discord.render import CONTENT_LIMIT, fit, sanitize
from adapters.discord.surface import NO_MENTIONS
from adapters.discord.translate import memory_place, where_of
from adapters.dispatch import memory
from adapters.dispatch.intents import Actor, MemoryAction, MemoryScope
from adapters.dispatch.intents import Memory as MemoryIntent
from core.agent import Agent

REACTBOT = app_commands.Group(name="reactbot", description="reactbot's settings here.")

ACTIONS: dict[str, tuple[MemoryAction, MemoryScope]] = {
    "list": ("list", "me"),
    "forget": ("forget", "me"),
    "clear": ("clear", "me"),
    "clear channel": ("clear", "channel"),
}


class _HasAgent(Protocol):
    agent: Agent


class _Cog(Protocol):
    """What the command needs of the cog that carries it."""

    bot: discord.Client

    @property
    def services(self) -> _HasAgent: ...

    async def _admit(self, interaction: discord.Interaction) -> Asker | None: ...

    def _actor(self, user: discord.User | discord.Member, asker: Asker) -> Actor: ...


class MemoryCommand(commands.Cog):
    """The ``/reactbot memory`` subcommand, mixed into the cog (a Cog itself: discord.py
    binds a group's subcommands to cogs)."""

    @REACTBOT.command(name="memory", description="See or delete what I remember about you.")
    @app_commands.describe(
        action="list (the default), forget ID, clear yours, or clear the channel's (admins)",
        id="The memory to forget (its id, from the list)",
    )
    @app_commands.choices(action=[app_commands.Choice(name=a, value=a) for a in ACTIONS])
    async def memory(
        self,
        interaction: discord.Interaction,
        action: app_commands.Choice[str] | None = None,
        id: str | None = None,
    ) -> None:
        cog = cast(_Cog, self)
        asker = await cog._admit(interaction)
        if asker is None:
            return
        me = cog.bot.user
        channel, channel_id = interaction.channel, interaction.channel_id or 0
        chosen, scope = ACTIONS[action.value if action else "list"]
        intent = MemoryIntent(
            event=f"discord:interaction:{interaction.id}",
            actor=cog._actor(interaction.user, asker),
            where=where_of(channel, channel_id, bot_id=me.id if me else 0),
            place=asker.where(*memory_place(channel, channel_id)),
            action=chosen,
            id=id or "",
            scope=scope,
        )
        memories = cog.services.agent.memories
        text = await memory.memory_reply(intent, memories, escape=sanitize, room=CONTENT_LIMIT)
        await interaction.response.send_message(
            fit(text), ephemeral=True, allowed_mentions=NO_MENTIONS, suppress_embeds=True
        )
