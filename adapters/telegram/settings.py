"""The Telegram adapter's own settings: plain values, filled in by ``bot.serve_telegram``.

Only what is truly Telegram's; who may ask where, admins, cooldown, verbosity and the run's
limits are the surface's ``Policy`` (``adapters.policy``, built by ``bot.policy.policy_for``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

DEFAULT_API = "https://api.telegram.org/bot"


@dataclass(frozen=True, slots=True)
class TelegramSettings:
    token: str = field(repr=False)
    api_base_url: str = DEFAULT_API
    """The Bot API prefix the token is appended to (a local Bot API server, a proxy, a fake)."""
    poll_timeout: float = 10.0
    """Seconds one getUpdates long poll waits for an update."""
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None
    """Where Telegram posts updates in webhook mode (``adapters.telegram.webhook``)."""
    webhook_secret: str | None = field(default=None, repr=False)
    """The ``secret_token`` given to ``setWebhook``, checked on every request."""
