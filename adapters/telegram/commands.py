"""A chat's settings on Telegram: ``/settings``, ``/verbosity``, ``/model``, ``/persona``,
``/tools`` and ``/usage``, on the shared ``ChannelChoices`` (the same settings Discord's
``/reactbot`` and Slack's ``/ask-settings`` change), kept under the chat (``telegram:<chat>``:
its forum topics follow it, as a Discord thread follows its channel).

Anyone who may ask here may read them (``/settings``, ``/usage``, ``/model`` and ``/tools``
without an argument); changing them needs an admin: a user in ``telegram.admins``, or in a
group one of the chat's administrators (``getChatAdministrators``, cached for
``ADMINS_TTL`` seconds, so a promotion or demotion counts within a minute). In a private
chat only ``telegram.admins`` may change them, as in Discord's DMs.

::

    /settings                          verbosity, model, tools and the persona's length
    /verbosity full|compact|answer|default
    /model [NAME|default]              without NAME: the catalogue
    /persona [TEXT|clear]              without TEXT: its length, and how to set it
    /tools [NAME]                      without NAME: which are on; with it: on <-> off
    /usage                             the tokens you used today

``/memory [list|forget ID|clear [channel]]`` is the shared memory command
(``adapters.dispatch.memory``), said privately. The settings commands are the shared
handlers' (``adapters.dispatch.commands``, translated in ``adapters.telegram.intents``); only
how to use ``/verbosity`` and ``/persona`` is this module's. Telegram has no message only one member of a group sees. In a private chat the reply is
there. In a group, ``forget`` and ``clear`` answer in the group (their reply names an id or a
count, never a memory's text); the list goes to the person's private chat with the bot
(more private than the group, so the travel rule holds), and when Telegram refuses that (they
never started a chat with the bot) the group hears only how many there are, and how to see
them.

Replies are the shared wording drawn as Telegram HTML (``markdown_html``: a model's name in
backticks is ``code``); a person's text in them is escaped like any other.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Protocol

from telegram import Bot
from telegram.error import TelegramError

from adapters import words
from adapters.dispatch import memory
from adapters.dispatch.intents import Actor, Where
from adapters.dispatch.intents import Memory as MemoryIntent
from adapters.telegram.render import TelegramPayload, inert
from core.errors import StoreUnavailable

if TYPE_CHECKING:
    from adapters.dispatch.handlers.ask import Answering
    from adapters.policy import Policy
    from adapters.telegram.asker import Asker
    from adapters.telegram.surface import Chat

log = logging.getLogger(__name__)

ADMINS_TTL = 60.0
"""Seconds a group's administrators are remembered (one getChatAdministrators a minute)."""
ONLY_ADMINS = words.ONLY_ADMINS
COMMANDS = ("settings", "verbosity", "model", "persona", "tools", "usage")
VERBOSITY_USAGE = "Usage: /verbosity full|compact|answer|default"
PERSONA_USAGE = "/persona TEXT sets it (admins); /persona clear clears it."
"""After the persona's length (``/persona`` alone): how to change it, in Telegram's commands."""
MEMORY_ROOM = 3500
"""Characters of one listing (a Telegram message holds 4,096 after entities)."""


class ChatAdmins:
    """Who administers each group, as Telegram says (cached briefly)."""

    def __init__(self, bot: Bot, *, ttl: float = ADMINS_TTL) -> None:
        self.bot = bot
        self.ttl = ttl
        self._known: dict[int, tuple[float, frozenset[int]]] = {}

    async def of(self, chat: int) -> frozenset[int]:
        """The user ids of ``chat``'s creator and administrators; none for a private chat,
        or while Telegram cannot say (logged; only ``telegram.admins`` count meanwhile)."""
        if chat > 0:
            return frozenset()
        now = time.monotonic()
        known = self._known.get(chat)
        if known is not None and known[0] > now:
            return known[1]
        try:
            members = await self.bot.get_chat_administrators(chat)
        except TelegramError as exc:
            log.warning("could not read the administrators of chat %s: %s", chat, exc)
            return frozenset()
        ids = frozenset(m.user.id for m in members)
        self._known[chat] = (now + self.ttl, ids)
        return ids


class Host(Protocol):
    """What the commands need of the bot they serve (``adapters.telegram.bot.TelegramBot``)."""

    answering: Answering[Asker]
    policy: Policy

    def chat(self, chat: int, thread: int | None = None) -> Chat: ...

    async def say(self, asker: Asker, text: str) -> None: ...

    async def say_html(self, asker: Asker, html: str) -> None: ...

    async def refusal(self, asker: Asker) -> str | None: ...


class SettingsCommands:
    """The settings commands of one ``TelegramBot``."""

    def __init__(self, bot: Host, telegram: Bot) -> None:
        self.bot = bot
        self.admins = ChatAdmins(telegram)

    async def is_admin(self, asker: Asker) -> bool:
        """``telegram.admins``, or (in a group) one of the chat's administrators."""
        if self.bot.policy.admin(str(asker.user)):
            return True
        return asker.user in await self.admins.of(asker.chat)

    async def run(self, command: str, asker: Asker) -> str:
        """The reply to a settings command that is no intent: a ``/verbosity`` without a
        level (the others go to ``adapters.dispatch``: ``intents.shared_command``)."""
        if command not in COMMANDS:
            return "That is not one of my commands."
        if (refused := await self.bot.refusal(asker)) is not None:
            return refused
        return VERBOSITY_USAGE

    async def memory(self, asker: Asker, name: str, argument: str) -> None:
        """``/memory argument`` from ``asker``: the shared handler, said privately (below)."""
        if (refused := await self.bot.refusal(asker)) is not None:
            await self.bot.say(asker, refused)
            return
        parsed = memory.parse(argument)
        if parsed is None:
            await self.bot.say(asker, words.MEMORY_USAGE)
            return
        action, ident, scope = parsed
        admin = await self.is_admin(asker)
        group = not asker.where.private
        intent = MemoryIntent(
            event=f"telegram:{asker.chat}:{asker.message}",
            actor=Actor("telegram", str(asker.user), f"telegram:{asker.user}", name, admin=admin),
            where=Where("telegram", "channel" if group else "dm", str(asker.chat)),
            place=asker.where,
            action=action,
            id=ident,
            scope=scope,
        )
        memories = self.bot.answering.agent.memories
        if not group or action != "list" or memories is None:
            await self.bot.say_html(
                asker, await memory.memory_reply(intent, memories, escape=inert, room=MEMORY_ROOM)
            )
            return
        try:
            found = await memory.visible(intent, memories)
        except StoreUnavailable:
            await self.bot.say(asker, words.MEMORY_UNREADABLE)
            return
        listed = memory.listing(found, escape=inert, room=MEMORY_ROOM)
        try:
            await self.bot.chat(asker.user).send(TelegramPayload(listed))
        except TelegramError as exc:  # they never opened a private chat with the bot
            log.info("could not list memories to %s privately: %s", asker.user, exc)
            await self.bot.say(asker, words.memory_count_only(len(found)))
            return
        await self.bot.say(asker, words.MEMORY_SENT_PRIVATELY)
