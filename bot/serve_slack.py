"""``reactbot serve --platform slack``: maps the config onto the Slack adapter and runs it."""

from __future__ import annotations

from pydantic import SecretStr

from adapters.slack.bot import SlackBot
from adapters.slack.server import run
from adapters.slack.settings import SlackSettings
from bot.app import App, PlatformLink, longest_run
from bot.config import Config


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
        verbosity=slack.verbosity,
        per_thread=config.redis.per_thread,
        workspace_updates_per_minute=slack.workspace_updates_per_minute,
        allowed_channels=frozenset(slack.allowed_channels),
        allowed_users=frozenset(slack.allowed_users),
        admin_users=frozenset(slack.admin_users),
        approvers=config.agent.approval.approvers,
        cooldown_seconds=slack.cooldown_seconds,
        max_runs_per_user=config.agent.max_runs_per_user,
        run_lease=config.agent.deadline + 60,  # a dead replica's slot frees by then
        run_hold_at_most=longest_run(config),  # a live run renews it up to this
    )


async def serve_slack(app: App) -> None:
    """Runs until cancelled; on cancel, in-flight answers end in a final state first."""
    settings = slack_settings(app.config)
    per_minute = int(settings.workspace_updates_per_minute)
    bot = SlackBot(
        app.agent,
        claims=app.claims,
        cooldowns=app.cooldowns,
        stops=app.stops,
        slots=app.slots,
        broker=app.broker,
        channel_settings=app.channel_settings,
        settings=settings,
        # chat.update is limited per workspace: with Redis, every replica shares the budget
        update_budget=app.rate_budget("slack:chat.update", limit=per_minute)
        if per_minute > 0
        else None,
    )
    app.platforms["slack"] = PlatformLink(
        connected=lambda: _connected(bot),
        edits=lambda: bot.pacer.stats.edits,
        # 429s to chat.update, which the live messages see; slack_sdk retries the others
        rate_limited=lambda: bot.pacer.stats.rate_limited,
    )
    await run(bot)


async def _connected(bot: SlackBot) -> bool:
    return bot.connection is not None and await bot.connection()
