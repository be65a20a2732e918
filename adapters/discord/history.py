"""A channel's or thread's earlier messages on Discord, for a mention (``adapters.context``).

One Get Channel Messages call (``limit`` at most 100, the messages before the question, in
the question's own channel or thread and nowhere else), paced by discord.py's rate-limit
buckets and bounded by the pipeline's read timeout.

Permissions: View Channel and Read Message History. Without Read Message History Discord
returns no messages rather than an error (resources/message.mdx), so the bot looks at its own
permissions first and says what is missing; a 403 (50001 Missing Access, 50013 Missing
Permissions) is said likewise. The bot's own messages (answers, trace posts) are never read,
nor questions put to it (they and their answers are in the conversation's history).
"""

from __future__ import annotations

import logging

import discord

from adapters.context import Read, Said

log = logging.getLogger(__name__)

PAGE = 100
"""Discord's most messages per Get Channel Messages call."""
READABLE_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})
"""What people wrote; joins, pins and thread notices are not read."""

NO_HISTORY = (
    "⚠️ I can't read the earlier messages here (I lack the **Read Message History** "
    "permission in this channel), so I answered from your message alone."
)
NO_ACCESS = (
    "⚠️ I can't read the earlier messages here (Discord refused: {reason}), "
    "so I answered from your message alone."
)


async def read_before(message: discord.Message, *, limit: int, me: discord.abc.User) -> Read:
    """Up to ``limit`` messages before ``message`` in its channel, oldest first."""
    channel = message.channel
    if not _may_read_history(channel, message.guild):
        return Read(refused=NO_HISTORY)
    asked = min(max(limit, 1) * 2 + 1, PAGE)  # room for the bot's own posts, left out below
    try:
        found = [m async for m in channel.history(limit=asked, before=message)]
    except discord.Forbidden as exc:
        log.warning("could not read channel %s: %s", channel.id, exc)
        return Read(refused=NO_ACCESS.format(reason=f"{exc.code} {exc.text}".strip()))
    said = [s for m in reversed(found) if (s := _said(m, me)) is not None]
    return Read(tuple(said[-limit:]))


def _may_read_history(channel: object, guild: discord.Guild | None) -> bool:
    """False only when the bot can see it lacks Read Message History (cached permissions);
    a DM, or permissions it cannot compute, leave the answer to Discord."""
    if guild is None or not isinstance(channel, discord.abc.GuildChannel | discord.Thread):
        return True
    me = guild.me
    if me is None:
        return True
    return channel.permissions_for(me).read_message_history


def _said(message: discord.Message, me: discord.abc.User) -> Said | None:
    if message.author.id == me.id or message.type not in READABLE_TYPES:
        return None
    if me.id in message.raw_mentions:
        return None  # a question to the bot: it and its answer are in the conversation already
    text = message.clean_content  # mentions as @name: readable, and they ping nobody here
    names = [a.filename for a in message.attachments]
    if names:
        text += " [attached: " + ", ".join(names) + "]"
    if not text.strip():
        return None
    return Said(message.author.display_name, message.created_at.timestamp(), text)
