"""The platforms ``reactbot serve`` can serve, in one list.

A platform is a name, what it still needs from the config and the environment (so ``serve``
can say it in one line), and where its serving code lives. That module (with its SDK) is
imported only when the platform is served, so ``reactbot ask`` never loads discord.py or
slack-bolt. Adding a surface adds one entry to ``PLATFORMS`` and its own ``bot/serve_*.py``;
no other platform's code changes.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from bot.config import Config
    from bot.hosting import Host

Serve = Callable[["Host"], Awaitable[None]]
"""A platform's ``serve``: given the app (``bot.app.App``, a ``Host``), serves until cancelled."""


@dataclass(frozen=True, slots=True)
class Platform:
    name: str
    """What ``serve --platform`` takes, and the conversations' prefix (``discord:…``)."""
    title: str
    how_to_enable: str
    """One or more lines for "nothing to serve", each starting with ``{title}:``."""
    missing: Callable[[Config], list[str]]
    """The environment variables it still needs, each with what it is for (empty: ready)."""
    started: Callable[[Config], bool]
    """Whether any of its secrets is set: half-configured platforms are named."""
    module: str
    """``module:function`` serving it until cancelled; imported when it is served."""
    instead: Callable[[Config], str | None] = lambda config: None
    """Another way to finish its setup with what is already set (a sentence), or None."""

    def enabled(self, config: Config) -> bool:
        return not self.missing(config)

    def load(self) -> Serve:
        """Import its serving module (and its SDK): before the heap is settled."""
        module, function = self.module.split(":")
        return cast(Serve, getattr(importlib.import_module(module), function))


def _discord_missing(config: Config) -> list[str]:
    return [] if config.secrets.discord_token else ["DISCORD_TOKEN (the bot token)"]


def _slack_missing(config: Config) -> list[str]:
    secrets = config.secrets
    missing = [] if secrets.slack_bot_token else ["SLACK_BOT_TOKEN (the xoxb- bot token)"]
    if config.slack.mode == "socket" and secrets.slack_app_token is None:
        missing.append("SLACK_APP_TOKEN (the xapp- app-level token, for Socket Mode)")
    if config.slack.mode == "http" and secrets.slack_signing_secret is None:
        missing.append("SLACK_SIGNING_SECRET (for slack.mode: http)")
    return missing


def _slack_instead(config: Config) -> str | None:
    """The other mode, when its secret is the one already set."""
    secrets, mode = config.secrets, config.slack.mode
    if mode == "socket" and secrets.slack_app_token is None and secrets.slack_signing_secret:
        return (
            "Or set slack.mode: http (REACTBOT_SLACK__MODE=http), which uses the "
            "SLACK_SIGNING_SECRET already set (Slack then sends events to slack.port)."
        )
    if mode == "http" and secrets.slack_signing_secret is None and secrets.slack_app_token:
        return (
            "Or set slack.mode: socket (REACTBOT_SLACK__MODE=socket), which uses the "
            "SLACK_APP_TOKEN already set."
        )
    return None


def _slack_started(config: Config) -> bool:
    s = config.secrets
    return any(
        v is not None for v in (s.slack_bot_token, s.slack_app_token, s.slack_signing_secret)
    )


def _web_missing(config: Config) -> list[str]:
    web = config.web
    if not web.chat:
        return ["web.chat: true in the config (or run: reactbot serve --platform web)"]
    loopback = web.host in ("127.0.0.1", "::1", "localhost") or web.host.startswith("127.")
    if not loopback and config.secrets.web_token is None:
        return [f"REACTBOT_WEB_TOKEN (web.host {web.host} is not a loopback address)"]
    return []


def _telegram_missing(config: Config) -> list[str]:
    return [] if config.secrets.telegram_bot_token else ["TELEGRAM_BOT_TOKEN (BotFather's token)"]


PLATFORMS: tuple[Platform, ...] = (
    Platform(
        name="discord",
        title="Discord",
        how_to_enable="Discord: set DISCORD_TOKEN (bot token; enable the Message Content intent).",
        missing=_discord_missing,
        started=lambda config: config.secrets.discord_token is not None,
        module="bot.serve_discord:serve_discord",
    ),
    Platform(
        name="slack",
        title="Slack",
        how_to_enable=(
            "Slack:   set SLACK_BOT_TOKEN, and SLACK_APP_TOKEN for slack.mode: socket (the default)\n"
            "         or SLACK_SIGNING_SECRET for slack.mode: http."
        ),
        missing=_slack_missing,
        started=_slack_started,
        module="bot.serve_slack:serve_slack",
        instead=_slack_instead,
    ),
    Platform(
        name="web",
        title="Web chat",
        how_to_enable="Web chat: reactbot serve --platform web, then open http://127.0.0.1:8080/",
        missing=_web_missing,
        started=lambda config: config.web.chat,
        module="bot.serve_web:serve_web",
    ),
    Platform(
        name="telegram",
        title="Telegram",
        how_to_enable="Telegram: set TELEGRAM_BOT_TOKEN (from BotFather's /newbot).",
        missing=_telegram_missing,
        started=lambda config: config.secrets.telegram_bot_token is not None,
        module="bot.serve_telegram:serve_telegram",
    ),
)
BY_NAME = {platform.name: platform for platform in PLATFORMS}


def platform(name: str) -> Platform:
    return BY_NAME[name]


def enabled(config: Config) -> list[Platform]:
    """The platforms ready to serve with this config and environment, in list order."""
    return [p for p in PLATFORMS if p.enabled(config)]
