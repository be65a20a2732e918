"""The Slack adapter's own settings: plain values, filled in by ``bot.serve_slack``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from adapters.answering import Approvers
from adapters.context import ContextSettings
from adapters.live import Verbosity

Streaming = Literal["auto", "native", "update"]

DEFAULT_API_BASE_URL = "https://slack.com/api/"


@dataclass(frozen=True, slots=True)
class SlackSettings:
    bot_token: str = field(repr=False)
    """Secrets are left out of ``repr``: settings objects end up in logs and tracebacks."""
    signing_secret: str | None = field(default=None, repr=False)
    """Required in HTTP mode: every request's signature is checked with it."""
    app_token: str | None = field(default=None, repr=False)
    """Required in Socket Mode (``xapp-…``)."""
    mode: Literal["socket", "http"] = "socket"
    host: str = "0.0.0.0"
    port: int = 3000
    path: str = "/slack/events"
    api_base_url: str | None = None
    update_interval: float = 1.0
    verbosity: Verbosity = "full"
    """How much of a run a channel sees unless an admin set it (``/ask-settings``)."""
    """Least seconds between live updates in one channel (a final state never waits for it)."""
    streaming: Streaming = "auto"
    """``native`` (chat.startStream/appendStream/stopStream), ``update`` (chat.update), or
    ``auto``: native in DMs and assistant threads, chat.update in channels."""
    suggested_prompts: tuple[tuple[str, str], ...] = ()
    """``(title, message)`` pairs offered in a new assistant thread."""
    workspace_updates_per_minute: float = 50.0
    """Budget for ``chat.update`` across the workspace (Slack's Tier 3); 0 means no limit."""
    per_thread: bool = True
    """Each answer's thread is its own conversation; off: one conversation per channel."""
    allowed_channels: frozenset[str] = frozenset()
    """Empty: every channel (and DM) the bot is in."""
    allowed_users: frozenset[str] = frozenset()
    admin_users: frozenset[str] = frozenset()
    approvers: Approvers = "asker"
    """Who may decide on an action waiting for approval (``agent.approval.approvers``):
    ``asker`` (the asker or an admin), ``admins`` or ``anyone``."""
    cooldown_seconds: float = 5.0
    shutdown_grace: float = 10.0
    """Seconds to let stopped runs write their final state before shutdown cuts them off."""
    max_concurrent_runs: int = 500
    """Questions this replica answers at once."""
    max_runs_per_user: int = 2
    """Questions one user may have running at once, across replicas (``RunSlots``)."""
    run_lease: float = 240.0
    """Seconds a run slot outlives its last renewal (a replica that died mid-run frees it then)."""
    run_hold_at_most: float = 240.0
    """The longest a live run keeps renewing its slot (its deadline plus approval waits)."""

    thread_replies: bool = True
    """A message in the thread of one of the bot's answers is a question without a mention
    (``slack.thread_replies``)."""
    free_response_channels: frozenset[str] = frozenset()
    """Channel ids where every message is a question (``slack.free_response_channels``)."""
    context: ContextSettings = field(default_factory=ContextSettings)
    """How much of a thread's or channel's earlier messages a mention reads (``context.*``)."""
    merge_window: float = 0.0
    """``agent.merge_window``: a burst from one person is one question (0: off)."""

    @property
    def base_url(self) -> str:
        """slack_sdk joins method names onto ``base_url`` with urljoin: it needs the slash."""
        url = self.api_base_url or DEFAULT_API_BASE_URL
        return url if url.endswith("/") else url + "/"
