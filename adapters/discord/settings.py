"""The Discord adapter's own settings: the config fields that are truly Discord's.

The adapter must not import ``bot``; ``bot/serve_discord.py`` maps ``DiscordConfig`` onto this.
Who may ask where, admins, cooldown, verbosity and the run's limits are the surface's
``Policy`` (``adapters.policy``, built by ``bot.policy.policy_for``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Layout = Literal["components", "text"]


@dataclass(frozen=True, slots=True)
class DiscordSettings:
    api_base_url: str | None = None
    """REST base (``.../api/v10``) for proxies and tests; the gateway address is asked from it."""
    edit_interval: float = 1.2
    """Least seconds between live updates in one channel (a final state never waits for it)."""
    sync_commands: bool = True
    """Register ``/ask``, ``/reset`` and ``/trace`` at start (a bulk overwrite, idempotent)."""
    tick: float = 1.0
    """Re-render at least this often while a run works, so the elapsed seconds move."""
    layout: Layout = "components"
    """``components``: each message a Components V2 Container (``adapters.discord.layout``);
    ``text``: plain message content (``adapters.discord.render``)."""
    guild_ready_timeout: float = 2.0
    """How long discord.py waits for more GUILD_CREATEs before it is ready."""
    reply_followups: bool = True
    """A reply to one of the bot's messages, or a message in a thread the bot opened, is a
    question without a mention (``discord.reply_followups``)."""
    free_response_channels: tuple[int, ...] = ()
    """Channels (or thread parents) where every message is a question."""
