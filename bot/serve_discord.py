"""``reactbot serve --platform discord``: maps the config onto the Discord adapter and runs it.

Runs until cancelled; on cancel the bot stops its runs (their messages end as "stopped"),
closes the gateway and HTTP session, and returns.
"""

from __future__ import annotations

import asyncio
import logging

from adapters.attachments import ConversationFiles
from adapters.discord.client import ReactBot, create_bot
from adapters.discord.cog import Services
from adapters.discord.files import discord_downloader
from adapters.discord.scheduled import DiscordSchedules
from adapters.discord.settings import DiscordSettings
from bot.app import App, PlatformLink
from bot.policy import policy_for
from bot.web import LinkSigner

log = logging.getLogger(__name__)


def discord_settings(app: App) -> DiscordSettings:
    discord = app.config.discord
    return DiscordSettings(
        api_base_url=discord.api_base_url,
        edit_interval=discord.edit_interval,
        layout=discord.layout,
        reply_followups=discord.reply_followups,
        free_response_channels=discord.free_response_channels,
    )


def discord_files(app: App) -> ConversationFiles | None:
    files = app.config.files
    if not files.enabled:
        return None
    downloader = discord_downloader(
        app.config.discord.api_base_url, max_bytes=files.max_bytes, timeout=files.download_timeout
    )
    return ConversationFiles(
        app.stores.files,
        downloader,
        app.file_limits(),
        reader=app.file_readers,
        hearing=app.hearing,
    )


def shards(app: App) -> dict[str, object]:
    """``AutoShardedBot``'s own options: which shards this process runs (none: all of them)."""
    discord = app.config.discord
    chosen: dict[str, object] = {}
    if discord.shard_count is not None:
        chosen["shard_count"] = discord.shard_count
    if discord.shard_ids is not None:
        chosen["shard_ids"] = list(discord.shard_ids)
    return chosen


async def serve_discord(app: App) -> None:
    token = app.config.secrets.discord_token
    if token is None:
        raise RuntimeError("DISCORD_TOKEN is not set")
    services = Services(
        agent=app.agent,
        stores=app.stores,
        settings=discord_settings(app),
        policy=policy_for(app.config, "discord"),
        budgets=app.budgets,
        choices=app.channel_choices(),
        broker=app.broker,
        trace_link=LinkSigner.from_config(app.config).link,
        files=discord_files(app),
        room=app.room,
    )
    bot = create_bot(services, **shards(app))
    if app.scheduling is not None:  # scheduled questions posted here, and their command
        app.scheduling.runs.add("discord", DiscordSchedules(bot))
        bot.schedules = app.scheduling.desk
    app.platforms["discord"] = PlatformLink(
        connected=lambda: _connected(bot),
        edits=lambda: bot.cog.pacer.stats.edits if bot.cog is not None else 0,
        rate_limited=lambda: bot.watch.hits,  # every 429 from Discord's API, once
    )
    try:
        await bot.start(token.get_secret_value())
    except asyncio.CancelledError:
        log.info("discord: shutting down")
        raise
    finally:
        if not bot.is_closed():
            await bot.close()


async def _connected(bot: ReactBot) -> bool:
    """Ready once, and every shard's gateway socket open now."""
    if not bot.is_ready() or bot.is_closed():
        return False
    return all(not shard.is_closed() for shard in bot.shards.values())
