"""``reactbot serve --platform slack``: maps the config onto the Slack adapter and runs it."""

from __future__ import annotations

import logging

from pydantic import SecretStr

from adapters.attachments import ConversationFiles
from adapters.pacing import Budget
from adapters.slack.bot import SlackBot
from adapters.slack.files import slack_downloader
from adapters.slack.scheduled import SlackSchedules
from adapters.slack.server import run
from adapters.slack.settings import SlackSettings
from adapters.slack.streaming import TIERS
from bot.app import App, PlatformLink
from bot.config import Config
from bot.policy import policy_for
from bot.web import LinkSigner

log = logging.getLogger(__name__)


def slack_settings(config: Config) -> SlackSettings:
    slack, secrets = config.slack, config.secrets

    def reveal(value: SecretStr | None) -> str | None:
        return value.get_secret_value() if value is not None else None

    return SlackSettings(
        bot_token=reveal(secrets.slack_bot_token) or "",
        signing_secret=reveal(secrets.slack_signing_secret),
        app_token=reveal(secrets.slack_app_token),
        mode=slack.mode,
        port=slack.port,
        api_base_url=slack.api_base_url,
        update_interval=slack.update_interval,
        streaming=slack.streaming_mode,
        suggested_prompts=tuple((p.title, p.message) for p in slack.suggested_prompts),
        workspace_updates_per_minute=slack.workspace_updates_per_minute,
        thread_replies=slack.thread_replies,
        free_response_channels=frozenset(slack.free_response_channels),
    )


def stream_budgets(app: App) -> dict[str, Budget]:
    """chat.startStream / appendStream / stopStream budgets in Redis (none without it)."""
    budgets: dict[str, Budget] = {}
    for method, per_minute in TIERS.items():
        budget = app.rate_budget(f"slack:{method}", limit=per_minute)
        if budget is not None:
            budgets[method] = budget
    return budgets


def slack_files(app: App, settings: SlackSettings) -> ConversationFiles | None:
    files = app.config.files
    if not files.enabled:
        return None
    downloader = slack_downloader(
        settings.api_base_url,
        settings.bot_token,
        max_bytes=files.max_bytes,
        timeout=files.download_timeout,
    )
    return ConversationFiles(
        app.stores.files,
        downloader,
        app.file_limits(),
        reader=app.file_readers,
        hearing=app.hearing,
    )


async def serve_slack(app: App) -> None:
    """Runs until cancelled; on cancel, in-flight answers end in a final state first."""
    settings = slack_settings(app.config)
    for note in app.config.slack.deprecations:
        log.warning("%s", note)
    per_minute = int(settings.workspace_updates_per_minute)
    bot = SlackBot(
        app.agent,
        stores=app.stores,
        broker=app.broker,
        budgets=app.budgets,
        choices=app.channel_choices(),
        files=slack_files(app, settings),
        settings=settings,
        policy=policy_for(app.config, "slack"),
        trace_link=LinkSigner.from_config(app.config).link,
        room=app.room,
        # chat.update is limited per workspace: with Redis, every replica shares the budget
        update_budget=app.rate_budget("slack:chat.update", limit=per_minute)
        if per_minute > 0
        else None,
        # the streaming methods' tiers, likewise shared by every replica
        stream_budgets=stream_budgets(app),
    )
    if app.scheduling is not None:  # scheduled questions posted here, and their command
        app.scheduling.runs.add("slack", SlackSchedules(bot))
        bot.commands.schedules = app.scheduling.desk
    app.platforms["slack"] = PlatformLink(
        connected=lambda: _connected(bot),
        edits=lambda: bot.pacer.stats.edits,
        # 429s to chat.update, which the live messages see; slack_sdk retries the others
        rate_limited=lambda: bot.pacer.stats.rate_limited,
    )
    await run(bot)


async def _connected(bot: SlackBot) -> bool:
    return bot.connection is not None and await bot.connection()
