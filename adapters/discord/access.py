"""Who may ask where, and how often: pure decisions over ids, no discord.py objects.

The cog turns a message or interaction into an ``Asker``; these functions decide. Empty
allow-lists mean "everyone"; admins (``admin_users``, ``admin_roles`` or a guild
administrator) pass the user and role lists and may stop anyone's run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
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


class Cooldown:
    """Per-user spacing between accepted questions, in this process.

    A cooldown is a courtesy limit, not a guarantee: across shards a user could ask twice,
    which costs one extra answer and nothing else, so it does not need Redis.
    """

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._next: dict[int, float] = {}

    def wait_left(self, user_id: int) -> float:
        """Seconds until ``user_id`` may ask again; 0 means now, and starts a new cooldown."""
        now = self._clock()
        self._forget_expired(now)
        left = self._next.get(user_id, 0.0) - now
        if left > 0:
            return left
        if self.seconds > 0:
            self._next[user_id] = now + self.seconds
        return 0.0

    def _forget_expired(self, now: float) -> None:
        if len(self._next) > 1000:  # keep the map small on busy servers
            self._next = {k: v for k, v in self._next.items() if v > now}


def cooldown_message(seconds_left: float) -> str:
    return f"⏳ One moment: you can ask again in {math.ceil(seconds_left)} s."
