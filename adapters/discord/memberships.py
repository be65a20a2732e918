"""Which of the bot's allowed guilds a person DMing it belongs to (``DmMemberships``): the
facts the shared access rule (``adapters.dispatch.access``) decides a DM over, looked up
through discord.py."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator

import discord
from discord.ext import commands

from adapters.dispatch.access import Membership
from adapters.policy import AccessPolicy

log = logging.getLogger(__name__)


class DmMemberships:
    """Which of the bot's allowed guilds a user belongs to (with roles), for DMs to a bot
    restricted to some guilds, channels or roles. The member cache first, else one REST
    look-up per guild (``GET /guilds/{id}/members/{user}``; no privileged intent needed),
    remembered for ``ttl`` seconds so a stranger's stream of DMs costs little. The rule asks
    only for a DM to a restricted bot (``adapters.dispatch.access.Members``)."""

    def __init__(
        self,
        bot: commands.Bot | commands.AutoShardedBot,
        *,
        ttl: float = 300.0,
        max_users: int = 10_000,
    ) -> None:
        self._bot = bot
        self._ttl = ttl
        self._max_users = max_users
        self._known: OrderedDict[int, tuple[float, tuple[Membership, ...]]] = OrderedDict()

    async def of(self, user: str, access: AccessPolicy) -> tuple[Membership, ...]:
        try:
            user_id = int(user)
        except ValueError:  # not a Discord id: a member of nothing
            return ()
        now = time.monotonic()
        known = self._known.get(user_id)
        if known is not None and known[0] > now:
            return known[1]
        found = tuple([m async for m in self._look_up(user_id, access)])
        self._known[user_id] = (now + self._ttl, found)
        self._known.move_to_end(user_id)
        while len(self._known) > self._max_users:
            self._known.popitem(last=False)
        return found

    async def _look_up(self, user_id: int, access: AccessPolicy) -> AsyncIterator[Membership]:
        for guild in self._guilds(access):
            member = guild.get_member(user_id)
            if member is None:
                try:
                    member = await guild.fetch_member(user_id)
                except discord.NotFound:
                    continue
                except discord.HTTPException as exc:
                    log.warning("member look-up in guild %s failed: %s", guild.id, exc)
                    continue
            roles = frozenset(str(role) for role in member._roles)
            yield Membership(space=str(guild.id), roles=roles)

    def _guilds(self, access: AccessPolicy) -> list[discord.Guild]:
        """The allowed guilds; without a guild list, those holding an allowed channel or role."""
        wanted = {int(guild) for guild in access.spaces}
        if not wanted:
            for channel_id in access.places:
                channel = self._bot.get_channel(int(channel_id))
                guild = getattr(channel, "guild", None)
                if isinstance(guild, discord.Guild):
                    wanted.add(guild.id)
            for guild in self._bot.guilds:
                if any(guild.get_role(int(role)) is not None for role in access.roles):
                    wanted.add(guild.id)
        return [guild for guild in self._bot.guilds if guild.id in wanted]
