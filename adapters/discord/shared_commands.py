"""``/reset``, ``/trace``, ``/reactbot settings|verbosity|usage`` and the 👍/👎 under an
answer, on Discord: each a translation into its intent for the shared handlers
(``adapters.dispatch.commands``), and the outcome drawn as an interaction response.

Here, not in ``cog.py``, as ``memory_command`` is: a mixin Cog whose app commands discord.py
collects along the cog's MRO. Discord's 3-second rule: ``/reset`` and ``/trace`` defer
once admitted (their handlers read and write the stores: ``Commands.dispatch(admitted=…)``),
then answer in the follow-up; a refusal, and the other commands, are answered at once. Replies are private but ``/trace``'s (its files are posted for the place).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import discord
from discord import app_commands
from discord.ext import commands

from adapters.discord.access import Asker
from adapters.discord.memory_command import REACTBOT
from adapters.discord.render import CONTENT_LIMIT, fit, sanitize
from adapters.discord.surface import NO_MENTIONS
from adapters.discord.translate import asker_of, where_of
from adapters.dispatch.commands import Admitted, Commands
from adapters.dispatch.intents import (
    Actor,
    Command,
    Reset,
    Settings,
    SetVerbosity,
    ShowSettings,
    ShowTrace,
    Usage,
    Vote,
)
from adapters.dispatch.outcome import Drop, Refusal, Said
from adapters.live import VERBOSITIES, Verbosity

if TYPE_CHECKING:
    from adapters.discord.layout import ComponentsRenderer
    from adapters.discord.render import DiscordRenderer

Outcome = Refusal | Drop | Said


class _Cog(Protocol):
    """What the commands need of the cog that carries them."""

    bot: discord.Client
    handlers: Commands
    renderer: DiscordRenderer | ComponentsRenderer

    def _actor(self, user: discord.User | discord.Member, asker: Asker) -> Actor: ...

    def _trace_post(self, interaction: discord.Interaction, said: Said) -> dict[str, Any]: ...


def shown(outcome: Outcome) -> str:
    """A reply's text as Discord shows it: escaped, mentions neutral, within a message."""
    return fit(sanitize(outcome.text), CONTENT_LIMIT) if not isinstance(outcome, Drop) else ""


class SharedCommands(commands.Cog):
    """The shared commands, mixed into the cog (a Cog itself: discord.py binds a group's
    subcommands, and collects app commands, along the cog's MRO)."""

    async def _dispatch(
        self,
        interaction: discord.Interaction,
        kind: type[Command],
        *,
        admitted: Admitted | None = None,
        **given: Any,
    ) -> Outcome:
        cog = cast(_Cog, self)
        channel, channel_id = interaction.channel, interaction.channel_id or 0
        me = cog.bot.user
        intent = kind(
            event=f"discord:interaction:{interaction.id}",
            actor=cog._actor(interaction.user, asker_of(interaction.user)),
            where=where_of(channel, channel_id, bot_id=me.id if me else 0),
            **given,
        )
        return await cog.handlers.dispatch(intent, admitted=admitted)

    async def _answer(
        self, interaction: discord.Interaction, kind: type[Command], **given: Any
    ) -> None:
        """A command answered at once, privately."""
        outcome = await self._dispatch(interaction, kind, **given)
        if not isinstance(outcome, Drop):
            await interaction.response.send_message(
                shown(outcome), ephemeral=True, allowed_mentions=NO_MENTIONS
            )

    async def _deferred(
        self, interaction: discord.Interaction, kind: type[Command], *, private: bool
    ) -> Outcome:
        """A command whose handler reads and writes the stores: deferred once admitted (a
        refusal is answered at once, privately; a redelivery not at all)."""

        async def defer() -> None:
            await interaction.response.defer(ephemeral=private, thinking=True)

        outcome = await self._dispatch(interaction, kind, admitted=defer)
        if isinstance(outcome, Refusal):
            await interaction.response.send_message(
                shown(outcome), ephemeral=True, allowed_mentions=NO_MENTIONS
            )
        return outcome

    @app_commands.command(name="reset", description="Forget this conversation's history.")
    async def reset(self, interaction: discord.Interaction) -> None:
        outcome = await self._deferred(interaction, Reset, private=True)
        if isinstance(outcome, Said):
            await interaction.followup.send(shown(outcome), ephemeral=True)

    @app_commands.command(name="trace", description="Post the last trace of this conversation.")
    async def trace(self, interaction: discord.Interaction) -> None:
        outcome = await self._deferred(interaction, ShowTrace, private=False)
        if not isinstance(outcome, Said):
            return
        if outcome.trace is None:
            await interaction.followup.send(shown(outcome), allowed_mentions=NO_MENTIONS)
            return
        await interaction.followup.send(**cast(_Cog, self)._trace_post(interaction, outcome))

    @REACTBOT.command(name="verbosity", description="How much of each run this channel sees.")
    @app_commands.describe(
        level="full: every step live; compact: one status line; answer: only the answer"
    )
    @app_commands.choices(
        level=[app_commands.Choice(name=v, value=v) for v in (*VERBOSITIES, "default")]
    )
    async def verbosity(
        self, interaction: discord.Interaction, level: app_commands.Choice[str]
    ) -> None:
        chosen = None if level.value == "default" else cast(Verbosity, level.value)
        await self._answer(interaction, Settings, change=SetVerbosity(chosen))

    @REACTBOT.command(name="settings", description="Show reactbot's settings for this channel.")
    async def show_settings(self, interaction: discord.Interaction) -> None:
        await self._answer(interaction, Settings, change=ShowSettings())

    @REACTBOT.command(name="usage", description="The tokens you have used today.")
    async def usage(self, interaction: discord.Interaction) -> None:
        await self._answer(interaction, Usage)

    async def vote_pressed(
        self, interaction: discord.Interaction, run_id: str, vote: Literal["up", "down"]
    ) -> None:
        """Anyone may vote on an answer; only the voter hears back."""
        await self._answer(interaction, Vote, run_id=run_id, value=vote)
