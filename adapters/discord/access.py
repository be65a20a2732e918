"""Who may ask where: pure decisions over ids, no discord.py objects.

How often one may ask is the answering pipeline's (``adapters.answering``), for every surface.

The cog turns a message or interaction into an ``Asker``; these functions decide. Empty
allow-lists mean "everyone"; admins (``admin_users``, ``admin_roles`` or a guild
administrator) pass the user and role lists and may stop anyone's run.

A DM has no guild, channel or roles of its own, so when the bot is restricted to guilds,
channels or roles, a DM is answered only for ``allowed_users`` (and ``admin_users``) or for
a member of an allowed guild, holding an allowed role when roles are listed: someone who met
the bot in another server gets a one-line refusal and costs no model call. The cog looks the
memberships up (``Asker.memberships``); deciding stays here.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.discord.settings import DiscordSettings
from core.memories import Where


@dataclass(frozen=True, slots=True)
class Asker:
    user_id: int
    role_ids: frozenset[int] = frozenset()
    guild_id: int | None = None
    """None in DMs."""
    places: tuple[int, ...] = ()
    """The channel, its parent (for a thread) and its category: any may be allow-listed."""
    guild_admin: bool = False
    memberships: tuple[Membership, ...] = ()
    """In DMs: the allowed guilds (``dm_guilds``) the user is a member of, with their roles."""

    def where(self, place: str) -> Where:
        """Where they ask, as memories read it: the guild is the space; a DM is private."""
        return Where("discord", str(self.guild_id or ""), place, self.guild_id is None)


@dataclass(frozen=True, slots=True)
class Membership:
    guild_id: int
    role_ids: frozenset[int] = frozenset()


def restricted(settings: DiscordSettings) -> bool:
    """The bot is limited to some guilds, channels or roles (which DMs must respect too)."""
    return bool(settings.allowed_guilds or settings.allowed_channels or settings.allowed_roles)


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
        if restricted(settings):
            return None if _dm_allowed(settings, asker) else _dm_refused()
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


def _dm_allowed(settings: DiscordSettings, asker: Asker) -> bool:
    if asker.user_id in settings.allowed_users or asker.user_id in settings.admin_users:
        return True
    for member in asker.memberships:
        if settings.allowed_guilds and member.guild_id not in settings.allowed_guilds:
            continue
        roles_ok = not settings.allowed_roles or bool(member.role_ids & set(settings.allowed_roles))
        if roles_ok or member.role_ids & set(settings.admin_roles):
            return True
    return False


def _dm_refused() -> str:
    return "I answer direct messages only for members of the servers I serve; ask me there."


def _not_allowed() -> str:
    return "Sorry, you're not on the list of people who can ask me questions here."
