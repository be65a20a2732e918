"""The policy of one surface: who may ask where, who is an admin, and the limits of a run.

Plain values, built once from the config by ``bot.policy.policy_for(config, platform)`` (the
only reader of the policy's config keys) and handed to a surface beside its settings, which
keep only what is truly its platform's (tokens, API base, layout). Leases, merge window,
context and slots mean the same on every surface; what differs is a key that says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from adapters.context import ContextSettings
from adapters.live import Verbosity

Approvers = Literal["asker", "admins", "anyone"]
"""``agent.approval.approvers``: who may decide on an action waiting for approval."""
Dms = Literal["open", "members", "closed"]
"""Direct messages: answered for anyone allowed; only for allowed users and members of the
allowed places (a bot restricted to some places); or not at all."""


def dm_rule(*, restricted: bool, allowed: bool = True) -> Dms:
    """A DM has no place of its own to allow-list: closed when the platform's DMs are off,
    for members of the allowed places when the bot is restricted to some, else open."""
    if not allowed:
        return "closed"
    return "members" if restricted else "open"


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """Who may ask where, in the platform's ids as text; an empty set allows everyone."""

    spaces: frozenset[str] = frozenset()
    """``discord.allowed_guilds``."""
    places: frozenset[str] = frozenset()
    """``discord.allowed_channels`` (a channel, thread parent or category),
    ``slack.allowed_channels``, ``telegram.allowed_chats``."""
    users: frozenset[str] = frozenset()
    """``discord.allowed_users``, ``slack.allowed_users``."""
    roles: frozenset[str] = frozenset()
    """``discord.allowed_roles``."""
    dms: Dms = "open"

    @property
    def restricted(self) -> bool:
        """Limited to some spaces, places or roles (which DMs must respect too)."""
        return bool(self.spaces or self.places or self.roles)


@dataclass(frozen=True, slots=True)
class Policy:
    """The limits and rules of one surface, the same fields on every surface."""

    platform: str
    access: AccessPolicy = AccessPolicy()
    admin_users: frozenset[str] = frozenset()
    """``<platform>.admin_users`` (``telegram.admins``): exempt from the cooldown and the
    budgets, may stop anyone's run and change a place's settings."""
    admin_roles: frozenset[str] = frozenset()
    """``discord.admin_roles``."""
    approvers: Approvers = "asker"
    cooldown_seconds: float = 5.0
    """``<platform>.cooldown_seconds``: least seconds between one person's questions."""
    max_runs_per_user: int = 2
    """``agent.max_runs_per_user``: questions one person may have running at once, across
    processes (``RunSlots``)."""
    lease: float = 25.0
    """``agent.lease_seconds``: seconds a run slot outlives its last renewal (a process that
    died mid-run frees it), and how long an answer may go without a heartbeat before a live
    process finishes it as interrupted (``adapters.recovery``)."""
    hold_at_most: float = 240.0
    """The longest a live run keeps renewing its slot (its deadline plus approval waits:
    ``bot.app.longest_run``)."""
    merge_window: float = 0.0
    """``agent.merge_window``: a burst from one person is one question (0: off)."""
    verbosity: Verbosity = "full"
    """What a place sees unless an admin chose for it (``<platform>.verbosity``)."""
    per_thread: bool = True
    """``redis.per_thread``: a thread is its own conversation."""
    context: ContextSettings = field(default_factory=ContextSettings)
    """``context.*``: how much of a place's earlier messages a mention reads."""

    def admin(self, user: str, *, roles: Iterable[str] = (), platform: bool = False) -> bool:
        """Whether ``user`` is an admin here: the platform says so (a guild's or a group's
        administrator, ``platform``), or the config lists them (``admin_users``) or one of
        their ``roles`` (``admin_roles``). Every surface asks this, none decides it."""
        return platform or user in self.admin_users or any(r in self.admin_roles for r in roles)
