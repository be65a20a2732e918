"""The asker's facts as Discord gives them (``Asker``), and whether they are an admin here.

Who may ask where is decided once for every surface (``adapters.dispatch.access``) over the
``Actor`` and ``Where`` the cog translates; a DM's memberships of the allowed guilds are
looked up by ``adapters.discord.memberships``.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.policy import Policy
from core.memories import Where


@dataclass(frozen=True, slots=True)
class Asker:
    user_id: int
    role_ids: frozenset[int] = frozenset()
    guild_id: int | None = None
    """None in DMs."""
    guild_admin: bool = False

    def where(self, place: str, closed: bool = False) -> Where:
        """Where they ask, as memories read it: the guild is the space; a DM is private; a
        private thread closed (``translate.memory_place``)."""
        return Where("discord", str(self.guild_id or ""), place, self.guild_id is None, closed)


def is_admin(policy: Policy, asker: Asker) -> bool:
    roles = (str(role) for role in asker.role_ids)
    return policy.admin(str(asker.user_id), roles=roles, platform=asker.guild_admin)
