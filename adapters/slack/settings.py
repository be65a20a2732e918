"""The Slack adapter's own settings: plain values, filled in by ``bot.serve_slack``.

Only what is truly Slack's; who may ask where, admins, cooldown, verbosity and the run's
limits are the surface's ``Policy`` (``adapters.policy``, built by ``bot.policy.policy_for``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

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
    """Least seconds between live updates in one channel (a final state never waits for it)."""
    streaming: Streaming = "auto"
    """``native`` (chat.startStream/appendStream/stopStream), ``update`` (chat.update), or
    ``auto``: native in DMs and assistant threads, chat.update in channels."""
    suggested_prompts: tuple[tuple[str, str], ...] = ()
    """``(title, message)`` pairs offered in a new assistant thread."""
    workspace_updates_per_minute: float = 50.0
    """Budget for ``chat.update`` across the workspace (Slack's Tier 3); 0 means no limit."""
    shutdown_grace: float = 10.0
    """Seconds to let stopped runs write their final state before shutdown cuts them off."""

    thread_replies: bool = True
    """A message in the thread of one of the bot's answers is a question without a mention
    (``slack.thread_replies``)."""
    free_response_channels: frozenset[str] = frozenset()
    """Channel ids where every message is a question (``slack.free_response_channels``)."""

    @property
    def base_url(self) -> str:
        """slack_sdk joins method names onto ``base_url`` with urljoin: it needs the slash."""
        url = self.api_base_url or DEFAULT_API_BASE_URL
        return url if url.endswith("/") else url + "/"
