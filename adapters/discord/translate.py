"""Translating Discord's objects into ours: where an event happened (``where_of``; its
conversation is ``adapters.dispatch.conversation``'s), which settings a channel belongs to,
who asked (``Asker``), why a message is a question. Pure functions over discord.py's objects
(no I/O), so the cog that handles events stays about handling them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import discord

from adapters.discord.access import Asker
from adapters.discord.settings import DiscordSettings
from adapters.dispatch.intents import PlaceKind, Where

__all__ = [
    "Why",
    "asker_of",
    "category_of",
    "channel_name",
    "hidden_from_everyone",
    "is_bots_thread",
    "memory_place",
    "names_others",
    "question_from",
    "replies_to",
    "settings_key",
    "where_of",
    "why_question",
]

if TYPE_CHECKING:  # discord.py defines these unions for type checkers only
    from discord.abc import MessageableChannel
    from discord.interactions import InteractionChannel

    Channel = MessageableChannel | InteractionChannel | None


def settings_key(channel: Channel, channel_id: int) -> str:
    """``discord:{channel}`` whose settings apply: a thread follows its parent channel."""
    parent = getattr(channel, "parent_id", None) if isinstance(channel, discord.Thread) else None
    return f"discord:{parent or channel_id}"


def memory_place(channel: Channel, channel_id: int) -> tuple[str, bool]:
    """The place memories are kept and recalled for (``core.memories.Where``), and whether
    it is closed: a thread follows its parent channel as its settings do, but a private
    thread is its own place, closed (its people's facts never reach the channel); a channel
    @everyone cannot view (and its threads) is closed too."""
    if isinstance(channel, discord.Thread) and channel.type == discord.ChannelType.private_thread:
        return f"discord:{channel_id}", True
    return settings_key(channel, channel_id), hidden_from_everyone(channel)


def hidden_from_everyone(channel: Channel) -> bool:
    """A server channel (a thread: its parent's overwrites) the ``@everyone`` role may not
    view: only some of the server see it. One discord.py cannot resolve (its parent not
    cached, a partial channel) counts as hidden; a DM is private, not hidden."""
    guild = getattr(channel, "guild", None)
    if channel is None or not isinstance(guild, discord.Guild):
        return False
    try:
        return not channel.permissions_for(guild.default_role).view_channel
    except (discord.ClientException, AttributeError, TypeError):
        return True


def category_of(channel: object) -> str | None:
    """The category of the channel (of a thread's parent): ``allowed_channels`` may name it."""
    parent = channel.parent if isinstance(channel, discord.Thread) else channel
    category_id = getattr(parent, "category_id", None)
    return str(category_id) if isinstance(category_id, int) else None


def asker_of(user: discord.User | discord.Member) -> Asker:
    if not isinstance(user, discord.Member):
        return Asker(user.id)
    try:
        admin = user.guild_permissions.administrator
    except (AttributeError, TypeError):  # roles not cached: treat as a regular member
        admin = False
    return Asker(
        user_id=user.id,
        role_ids=frozenset(user._roles),
        guild_id=user.guild.id,
        guild_admin=admin,
    )


def where_of(channel: Channel, channel_id: int, *, bot_id: int) -> Where:
    """Where an event happened, as ``adapters.dispatch.conversation`` reads it: a thread's
    ``channel`` is its parent; a thread the bot opened on an answer is a ``bot_thread``; the
    category is the channel's (the parent's), which ``allowed_channels`` may name."""
    guild = getattr(channel, "guild", None)
    space = str(guild.id) if isinstance(guild, discord.Guild) else None
    name, category = channel_name(channel), category_of(channel)
    if not isinstance(channel, discord.Thread):
        kind: PlaceKind = "dm" if space is None else "channel"
        return Where("discord", kind, str(channel_id), space=space, category=category, name=name)
    if is_bots_thread(channel, bot_id):
        kind = "bot_thread"
    elif channel.type == discord.ChannelType.private_thread:
        kind = "private_thread"
    else:
        kind = "thread"
    parent = str(channel.parent_id or channel_id)
    thread = str(channel_id)
    return Where("discord", kind, parent, space=space, thread=thread, category=category, name=name)


def channel_name(channel: Channel) -> str:
    """``#general`` (a thread by its own name), ``DM``; "" when Discord gave no name."""
    if isinstance(channel, discord.DMChannel):
        return "DM"
    name = getattr(channel, "name", None)
    return f"#{name}" if isinstance(name, str) and name else ""


def question_from(content: str, bot_id: int) -> str:
    """The message text without the bot's own mention(s)."""
    return re.sub(rf"<@!?{bot_id}>", " ", content).strip()


Why = str
"""Why a message is a question: ``dm``, ``mention`` or ``followup`` (no mention needed)."""


def is_bots_thread(channel: Channel, bot_id: int) -> bool:
    """A thread the bot opened (an answer's trace thread): talking there is talking to it."""
    return isinstance(channel, discord.Thread) and channel.owner_id == bot_id


def replies_to(message: discord.Message, bot_id: int) -> bool:
    """A reply (message reference) to one of the bot's messages."""
    ref = message.reference
    resolved = ref.resolved if ref is not None else None
    return isinstance(resolved, discord.Message) and resolved.author.id == bot_id


def names_others(message: discord.Message, bot_id: int) -> bool:
    """The message is addressed to someone else: a person (other than the bot), a role,
    @everyone or @here. A reply's automatic ping of the bot is no one else."""
    if message.mention_everyone or message.role_mentions:
        return True
    return any(user.id != bot_id for user in message.mentions)


def why_question(message: discord.Message, bot_id: int, settings: DiscordSettings) -> Why | None:
    """Why ``message`` is a question for the bot, or None: a DM, a mention in its text, or
    (naming nobody else) a reply to the bot or a message in a thread it opened
    (``reply_followups``), or any message in a free-response channel."""
    if message.guild is None:
        return "dm"
    if bot_id in message.raw_mentions:
        return "mention"
    if names_others(message, bot_id):
        return None
    channel = message.channel
    if settings.reply_followups and (
        replies_to(message, bot_id) or is_bots_thread(channel, bot_id)
    ):
        return "followup"
    free = settings.free_response_channels
    parent = channel.parent_id if isinstance(channel, discord.Thread) else None
    if channel.id in free or (parent is not None and parent in free):
        return "followup"
    return None
