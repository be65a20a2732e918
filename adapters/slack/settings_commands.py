"""``/ask-settings``: the persona's modal (``prompt``), ``/ask-settings memory
[list|forget ID|clear [channel]]`` (``adapters.dispatch.memory``, answered ephemerally: only
the person sees their memories) and ``/ask-settings schedule add|list|pause|resume|delete|run``
(``adapters.dispatch.schedule``). ``show``, ``verbosity``, ``model``, ``tools``, ``usage``,
``reset`` and ``trace`` go to the shared handlers first (``adapters.slack.commands``).

The persona is the shared ``Settings`` intent too: ``prompt`` is ``EditPersona`` (an admin's,
``slack.admin_users``: the modal opens with the persona as it is), and the modal's
submission ``SetPersona``, checked again (the admin list may change while it is open); a
refusal or a persona that cannot be kept is the modal's error, so its text is not lost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from slack_bolt.context.ack.async_ack import AsyncAck

from adapters import words as sentences  # "words" names a command's words here
from adapters.dispatch import memory, schedule
from adapters.dispatch.intents import Actor, EditPersona, Memory, SetPersona, Settings, Where
from adapters.dispatch.outcome import Drop, Refusal, Said
from adapters.slack.markdown import escape
from adapters.slack.modals import INPUT_BLOCK, persona_modal, read_persona
from adapters.slack.payloads import memory_where, plain_text
from adapters.slack.places import Described
from core.prompt import PERSONA_CHARS

if TYPE_CHECKING:
    from adapters.dispatch.schedule import ScheduleDesk
    from adapters.policy import Policy
    from adapters.slack.commands import SharedCommands
    from adapters.slack.places import SlackPlaces
    from core.agent import Agent

SETTINGS_USAGE = (
    "Usage: `/ask-settings show`, `/ask-settings usage`, `/ask-settings reset`, "
    "`/ask-settings trace`, "
    "`/ask-settings verbosity full|compact|answer|default`, `/ask-settings model NAME|default`, "
    "`/ask-settings prompt`, `/ask-settings tools [NAME]`, "
    "`/ask-settings memory [list|forget ID|clear]` or "
    '`/ask-settings schedule add "<when>" <question>|list|pause|resume|delete|run ID`'
)


def settings_key(team: str, channel: str) -> str:
    """Where a channel's settings are kept: ``slack:{team}:{channel}``."""
    return f"slack:{team}:{channel}"


class Bot(Protocol):
    """What the command needs of the bot it serves (``adapters.slack.bot.SlackBot``)."""

    agent: Agent
    policy: Policy
    places: SlackPlaces
    shared: SharedCommands

    async def open_modal(self, trigger: str, view: dict[str, Any]) -> str | None: ...

    async def ephemeral(
        self, channel: str, user: str, text: str, *, thread_ts: str | None = None
    ) -> None: ...


class SettingsCommands:
    """The ``/ask-settings`` command and the persona modal, for one bot."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        self.schedules: ScheduleDesk | None = None
        """The schedule command's handler, while ``serve`` runs schedules."""

    async def on_settings(self, ack: AsyncAck, command: dict[str, Any]) -> None:
        """``show``, ``verbosity LEVEL``, ``model``, ``tools``, ``usage``, ``reset`` and
        ``trace`` are the shared handlers' (``adapters.slack.commands``); ``prompt``,
        ``memory`` and ``schedule`` are answered here."""
        words = plain_text(str(command.get("text", ""))).split()
        if await self.bot.shared.run(ack, command, words):
            return
        if words and words[0] == "memory":
            await ack(text=await self._memory(command, words[1:]), response_type="ephemeral")
            return
        if words and words[0] == "schedule":
            said = plain_text(str(command.get("text", ""))).strip()[len("schedule") :]
            await ack(text=await self._schedule(command, said), response_type="ephemeral")
            return
        if words == ["prompt"]:
            await self._persona_form(ack, command)
            return
        await ack(text=SETTINGS_USAGE, response_type="ephemeral")

    async def _persona_form(self, ack: AsyncAck, command: dict[str, Any]) -> None:
        """``prompt``: the persona's modal, for an admin (``EditPersona``), with the persona
        as it is."""
        outcome = await self.bot.shared.dispatch(command, Settings, change=EditPersona())
        if not isinstance(outcome, Said) or outcome.form is None:
            await ack(text=self.bot.shared.text(outcome), response_type="ephemeral")
            return
        await ack()
        team, channel = str(command.get("team_id", "")), str(command.get("channel_id", ""))
        view = persona_modal(settings_key(team, channel), channel, outcome.form, PERSONA_CHARS)
        problem = await self.bot.open_modal(str(command.get("trigger_id", "")), view)
        if problem is not None:
            user = str(command.get("user_id", ""))
            await self.bot.ephemeral(
                channel, user, sentences.form_failed(problem, "/ask-settings prompt")
            )

    async def _memory(self, command: dict[str, Any], words: list[str]) -> str:
        """``memory ...``: the shared handler, said ephemerally (in a channel too)."""
        parsed = memory.parse(" ".join(words))
        if parsed is None:
            return sentences.MEMORY_USAGE
        team, channel = str(command.get("team_id", "")), str(command.get("channel_id", ""))
        user = str(command.get("user_id", ""))
        private = channel.startswith("D")
        places = self.bot.places  # looked up within Slack's 3 s for the ack, with the store
        found = Described(closed=False) if private else await places.described(channel, within=1.0)
        actor = Actor(
            "slack",
            user,
            f"slack:{team}:{user}",
            str(command.get("user_name", "")),
            admin=self.bot.policy.admin(user),
        )
        action, ident, scope = parsed
        intent = Memory(
            event=f"slack:command:{command.get('trigger_id', '')}",
            actor=actor,
            where=Where("slack", "dm" if private else "channel", channel, space=team),
            place=memory_where(team, channel, private, found.closed, found.shared),
            action=action,
            id=ident,
            scope=scope,
        )
        return await memory.memory_reply(intent, self.bot.agent.memories, escape=escape, room=3000)

    async def _schedule(self, command: dict[str, Any], said: str) -> str:
        """``schedule ...``: the shared handler (``adapters.dispatch.schedule``)."""
        if self.schedules is None:
            return sentences.SCHEDULES_OFF
        parsed = schedule.parse(said)
        if parsed is None:
            return escape(sentences.SCHEDULE_USAGE)
        team, channel = str(command.get("team_id", "")), str(command.get("channel_id", ""))
        user, name = str(command.get("user_id", "")), str(command.get("user_name", ""))
        actor = Actor(
            "slack", user, f"slack:{team}:{user}", name, admin=self.bot.policy.admin(user)
        )
        where = Where("slack", "dm" if channel.startswith("D") else "channel", channel, space=team)
        place = schedule.place_of(where)  # a slash command names no thread: the channel
        assert place is not None  # Slack posts
        intent = schedule.Schedule(
            event=f"slack:command:{command.get('trigger_id', '')}",
            actor=actor,
            where=where,
            place=place,
            shown_as=f"@{name}" if name else "someone",  # plain text: never a <@U…> ping
            action=parsed.action,
            id=parsed.id,
            when=parsed.when,
            question=parsed.question,
        )
        return await self.schedules.reply(intent, escape=escape, room=3000)

    async def on_persona(self, ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]) -> None:
        """The persona's modal submitted: ``SetPersona``, by whoever submits it now."""
        read = read_persona(view)
        user = body.get("user") or {}
        if read is None:
            await ack()
            return
        _, channel, text = read
        team = str((body.get("team") or {}).get("id") or user.get("team_id") or "")
        command = {  # the submission as the command it finishes: who, where, once
            "team_id": team,
            "channel_id": channel,
            "user_id": str(user.get("id", "")),
            "user_name": str(user.get("username") or user.get("name") or ""),
            "trigger_id": str(body.get("trigger_id") or view.get("id", "")),
        }
        outcome = await self.bot.shared.dispatch(command, Settings, change=SetPersona(text))
        if isinstance(outcome, Refusal) or (isinstance(outcome, Said) and outcome.failed):
            await ack(response_action="errors", errors={INPUT_BLOCK: outcome.text[:150]})
            return
        await ack()
        if not isinstance(outcome, Drop):
            await self.bot.ephemeral(channel, command["user_id"], self.bot.shared.text(outcome))
