"""The Discord adapter's own settings: a mirror of the config fields it needs.

The adapter must not import ``bot``; ``bot/serve_discord.py`` maps ``DiscordConfig`` onto this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from adapters.answering import Approvers
from adapters.context import ContextSettings
from adapters.live import Verbosity

Layout = Literal["components", "text"]


@dataclass(frozen=True, slots=True)
class DiscordSettings:
    api_base_url: str | None = None
    """REST base (``.../api/v10``) for proxies and tests; the gateway address is asked from it."""
    edit_interval: float = 1.2
    """Least seconds between live updates in one channel (a final state never waits for it)."""
    allowed_guilds: tuple[int, ...] = ()
    allowed_channels: tuple[int, ...] = ()
    """Channel, thread-parent or category ids; empty allows every channel."""
    allowed_roles: tuple[int, ...] = ()
    allowed_users: tuple[int, ...] = ()
    admin_users: tuple[int, ...] = ()
    admin_roles: tuple[int, ...] = ()
    allow_dms: bool = True
    cooldown_seconds: float = 5.0
    per_thread: bool = True
    """A question asked in a thread gets the thread's own conversation history."""
    sync_commands: bool = True
    """Register ``/ask``, ``/reset`` and ``/trace`` at start (a bulk overwrite, idempotent)."""
    tick: float = 1.0
    """Re-render at least this often while a run works, so the elapsed seconds move."""
    verbosity: Verbosity = "full"
    """How much of a run a channel sees unless an admin set it (``/reactbot verbosity``)."""
    layout: Layout = "components"
    """``components``: each message a Components V2 Container (``adapters.discord.layout``);
    ``text``: plain message content (``adapters.discord.render``)."""
    guild_ready_timeout: float = 2.0
    """How long discord.py waits for more GUILD_CREATEs before it is ready."""
    approvers: Approvers = "asker"
    """Who may decide on an action that needs approval: asker (or an admin), admins, anyone."""
    max_runs_per_user: int = 2
    """Questions one user may have running at once (across shards, through ``RunSlots``)."""
    max_concurrent_runs: int = 500
    """Questions this process answers at once (as on every surface)."""
    run_lease: float = 240.0
    """Seconds a run slot outlives its last renewal (a shard that died mid-run frees it then)."""
    run_hold_at_most: float = 240.0
    """The longest a live run keeps renewing its slot (its deadline plus approval waits)."""
    reply_followups: bool = True
    """A reply to one of the bot's messages, or a message in a thread the bot opened, is a
    question without a mention (``discord.reply_followups``)."""
    free_response_channels: tuple[int, ...] = ()
    """Channels (or thread parents) where every message is a question."""
    context: ContextSettings = field(default_factory=ContextSettings)
    """How much of a channel's earlier messages a mention reads (``context.*``)."""
    merge_window: float = 0.0
    """``agent.merge_window``: a burst from one person is one question (0: off)."""
