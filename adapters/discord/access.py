"""Who may ask where: pure decisions over ids, no discord.py objects.

How often one may ask is the admission chain's (``adapters.dispatch.checks``), for every surface.

The cog turns a message or interaction into an ``Asker``; these functions decide over the
surface's ``Policy`` (``adapters.policy``: ids as text). Empty allow-lists mean "everyone";
admins (``admin_users``, ``admin_roles`` or a guild administrator) pass the user and role
lists and may stop anyone's run.

A DM has no guild, channel or roles of its own, so when the bot is restricted to guilds,
channels or roles, a DM is answered only for ``allowed_users`` (and ``admin_users``) or for
a member of an allowed guild, holding an allowed role when roles are listed: someone who met
the bot in another server gets a one-line refusal and costs no model call. The cog looks the
memberships up (``Asker.memberships``); deciding stays here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from adapters.policy import Policy
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

    def where(self, place: str, closed: bool = False) -> Where:
        """Where they ask, as memories read it: the guild is the space; a DM is private; a
        private thread closed (``translate.memory_place``)."""
        return Where("discord", str(self.guild_id or ""), place, self.guild_id is None, closed)


@dataclass(frozen=True, slots=True)
class Membership:
    guild_id: int
    role_ids: frozenset[int] = frozenset()


def restricted(policy: Policy) -> bool:
    """The bot is limited to some guilds, channels or roles (which DMs must respect too)."""
    return policy.access.restricted


def is_admin(policy: Policy, asker: Asker) -> bool:
    roles = (str(role) for role in asker.role_ids)
    return policy.admin(str(asker.user_id), roles=roles, platform=asker.guild_admin)


def refusal(policy: Policy, asker: Asker) -> str | None:
    """None when the asker may ask here; otherwise a short, friendly reason."""
    access = policy.access
    if asker.guild_id is None:
        if access.dms == "closed":
            return "I don't answer direct messages here; mention me in a server channel instead."
        if access.dms == "members":
            return None if _dm_allowed(policy, asker) else _dm_refused()
        return None if _user_allowed(policy, asker) else _not_allowed()
    if access.spaces and str(asker.guild_id) not in access.spaces:
        return "I'm not enabled in this server."
    if access.places and not _any(asker.places, access.places):
        return "I'm not enabled in this channel; try one where I am."
    return None if _user_allowed(policy, asker) else _not_allowed()


def _any(ids: Iterable[int], listed: frozenset[str]) -> bool:
    return any(str(i) in listed for i in ids)


def _user_allowed(policy: Policy, asker: Asker) -> bool:
    access = policy.access
    if not access.users and not access.roles:
        return True
    return (
        is_admin(policy, asker)
        or str(asker.user_id) in access.users
        or _any(asker.role_ids, access.roles)
    )


def _dm_allowed(policy: Policy, asker: Asker) -> bool:
    access, user = policy.access, str(asker.user_id)
    if user in access.users or policy.admin(user):
        return True
    for member in asker.memberships:
        if access.spaces and str(member.guild_id) not in access.spaces:
            continue
        roles_ok = not access.roles or _any(member.role_ids, access.roles)
        if roles_ok or _any(member.role_ids, policy.admin_roles):
            return True
    return False


def _dm_refused() -> str:
    return "I answer direct messages only for members of the servers I serve; ask me there."


def _not_allowed() -> str:
    return "Sorry, you're not on the list of people who can ask me questions here."
