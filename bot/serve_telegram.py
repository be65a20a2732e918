"""``reactbot serve --platform telegram``: the bot polls Telegram for updates and answers in
private chats until cancelled."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from adapters.attachments import ConversationFiles
from adapters.telegram.bot import TelegramBot
from adapters.telegram.files import telegram_downloader
from adapters.telegram.schedule_command import ScheduleCommand
from adapters.telegram.scheduled import TelegramSchedules
from adapters.telegram.settings import DEFAULT_API, TelegramSettings
from adapters.telegram.webhook import WebhookServer, webhook_path, webhook_secret
from bot.app import App, PlatformLink
from bot.config import Config
from bot.policy import policy_for
from bot.web import LinkSigner

log = logging.getLogger(__name__)


def telegram_settings(config: Config) -> TelegramSettings:
    telegram, token = config.telegram, config.secrets.telegram_bot_token
    if token is None:  # platforms.py names what is missing before this is reached
        raise ValueError("TELEGRAM_BOT_TOKEN is not set")
    return TelegramSettings(
        token=token.get_secret_value(),
        mode=telegram.mode,
        webhook_url=telegram.webhook_url,
        webhook_secret=webhook_secret(token.get_secret_value()),
        api_base_url=telegram.api_base_url or DEFAULT_API,
    )


def telegram_files(app: App, settings: TelegramSettings) -> ConversationFiles | None:
    """Documents and photos on a question (``files.*``), fetched from Telegram's file host."""
    files = app.config.files
    if not files.enabled:
        return None
    downloader = telegram_downloader(
        settings.api_base_url, max_bytes=files.max_bytes, timeout=files.download_timeout
    )
    return ConversationFiles(
        app.stores.files,
        downloader,
        app.file_limits(),
        reader=app.file_readers,
        hearing=app.hearing,
    )


def build_bot(app: App) -> TelegramBot:
    settings = telegram_settings(app.config)
    return TelegramBot(
        app.agent,
        stores=app.stores,
        budgets=app.budgets,
        choices=app.channel_choices(),
        settings=settings,
        policy=policy_for(app.config, "telegram"),
        broker=app.broker,
        files=telegram_files(app, settings),
        trace_link=LinkSigner.from_config(app.config).link,
        room=app.room,
    )


async def serve_telegram(app: App) -> None:
    bot = build_bot(app)
    if app.scheduling is not None:  # scheduled questions posted here, and their command
        app.scheduling.runs.add("telegram", TelegramSchedules(bot))
        ScheduleCommand(bot, app.scheduling.desk).install()
    runner: web.AppRunner | None = None
    try:
        await bot.start()
        if bot.settings.mode == "webhook":
            runner = await _serve_webhook(bot, port=app.config.telegram.port)
        else:
            log.info("telegram: polling for updates")
        app.platforms["telegram"] = PlatformLink(
            connected=lambda: _polling(bot),
            edits=lambda: bot.pacer.stats.edits + bot.group_pacer.stats.edits,
            rate_limited=lambda: bot.pacer.stats.rate_limited + bot.group_pacer.stats.rate_limited,
        )
        await asyncio.Event().wait()  # until cancelled
    finally:
        if runner is not None:
            await runner.cleanup()
        await bot.aclose()


async def _serve_webhook(bot: TelegramBot, *, port: int) -> web.AppRunner:
    settings = bot.settings
    assert settings.webhook_url is not None and settings.webhook_secret is not None
    path = webhook_path(settings.webhook_url)
    server = WebhookServer(bot, path=path, secret=settings.webhook_secret)
    runner = web.AppRunner(server.application(), access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port).start()
    log.info("telegram: webhook on port %d, path %s", port, path)
    return runner


async def _polling(bot: TelegramBot) -> bool:
    if bot.settings.mode == "webhook":
        return bot.application.running
    updater = bot.application.updater
    return updater is not None and updater.running
