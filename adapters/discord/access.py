"""Who may ask where: pure decisions over ids, no discord.py objects.

How often is ``core.stores.Cooldowns`` (shared by every shard when Redis is configured);
``cooldown_message`` words its refusal.

The cog turns a message or interaction into an ``Asker``; these functions decide. Empty
allow-lists mean "everyone"; admins (``admin_users``, ``admin_roles`` or a guild
administrator) pass the user and role lists and may stop anyone's run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from adapters.discord.settings import DiscordSettings


@dataclass(frozen=True, slots=True)
class Asker:
    user_id: int
    role_ids: frozenset[int] = frozenset()
    guild_id: int | None = None
    """None in DMs."""
    places: tuple[int, ...] = ()
    """The channel, its parent (for a thread) and its category: any may be allow-listed."""
    guild_admin: bool = False


def is_admin(settings: DiscordSettings, asker: Asker) -> bool:
    return (
        asker.guild_admin
        or asker.user_id in settings.admin_users
        or bool(asker.role_ids & set(settings.admin_roles))
    )


def refusal(settings: DiscordSettings, asker: Asker) -> str | None:
    """None when the asker may ask here; otherwise a short, friendly reason."""
    if asker.guild_id is None:
        if not settings.allow_dms:
            return "I don't answer direct messages here; mention me in a server channel instead."
        return None if _user_allowed(settings, asker) else _not_allowed()
    if settings.allowed_guilds and asker.guild_id not in settings.allowed_guilds:
        return "I'm not enabled in this server."
    if settings.allowed_channels and not set(asker.places) & set(settings.allowed_channels):
        return "I'm not enabled in this channel; try one where I am."
    return None if _user_allowed(settings, asker) else _not_allowed()


def _user_allowed(settings: DiscordSettings, asker: Asker) -> bool:
    if not settings.allowed_users and not settings.allowed_roles:
        return True
    return (
        is_admin(settings, asker)
        or asker.user_id in settings.allowed_users
        or bool(asker.role_ids & set(settings.allowed_roles))
    )


def _not_allowed() -> str:
    return "Sorry, you're not on the list of people who can ask me questions here."


def cooldown_message(seconds_left: float) -> str:
    return f"⏳ One moment: you can ask again in {math.ceil(seconds_left)} s."
