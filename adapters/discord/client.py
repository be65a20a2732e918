"""The bot: an ``AutoShardedBot`` (ready for sharding) carrying the ``AskCog``.

``api_base_url`` replaces discord.py's REST base (``Route.BASE``) and the gateway address is
then asked from that base (``GET /gateway/bot``), never the hard-coded one, so a proxy or a
local fake sees every call. Both are class attributes in discord.py, so they are set when
the bot logs in and restored when it closes.
"""

from __future__ import annotations

import logging
from typing import Any

import discord
import yarl
from discord.ext import commands
from discord.gateway import DiscordWebSocket
from discord.http import Route

from adapters.discord.cog import AskCog, Services
from adapters.discord.surface import NO_MENTIONS, RateLimitWatch

log = logging.getLogger(__name__)

MAX_RATELIMIT_WAIT = 30.0
"""Longer 429 waits raise (and LiveMessage postpones) instead of blocking inside discord.py."""


def intents() -> discord.Intents:
    chosen = discord.Intents.default()
    chosen.message_content = True  # privileged: the question is in the message text
    return chosen


class ReactBot(commands.AutoShardedBot):
    def __init__(self, services: Services, **options: Any) -> None:
        self.services = services
        self.watch = RateLimitWatch(lambda: None if self.cog is None else self.cog.pacer)
        super().__init__(
            command_prefix=commands.when_mentioned,
            help_command=None,
            intents=intents(),
            allowed_mentions=NO_MENTIONS,
            max_ratelimit_timeout=MAX_RATELIMIT_WAIT,
            http_trace=self.watch.trace_config,
            guild_ready_timeout=services.settings.guild_ready_timeout,
            **options,
        )
        self.cog: AskCog | None = None
        self._saved_endpoints: tuple[str, yarl.URL] | None = None

    async def login(self, token: str) -> None:
        base = self.services.settings.api_base_url
        if base is not None:
            self._saved_endpoints = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
            Route.BASE = base.rstrip("/")
        await super().login(token)

    async def setup_hook(self) -> None:
        if self.services.settings.api_base_url is not None:
            await self._use_gateway_from_rest()
        self.cog = AskCog(self, self.services, watch=self.watch)
        await self.add_cog(self.cog)
        if self.services.settings.sync_commands:
            synced = await self.tree.sync()
            log.info("synced %d application commands", len(synced))

    async def _use_gateway_from_rest(self) -> None:
        # AutoShardedClient asks /gateway/bot for the first connection; reconnects that cannot
        # resume fall back to DEFAULT_GATEWAY, so that must point at the same place.
        _, url, _ = await self.http.get_bot_gateway()
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)

    async def on_message(self, message: discord.Message, /) -> None:
        """No prefix commands: the cog's listener answers mentions."""

    async def close(self) -> None:
        if self.cog is not None:
            await self.cog.shutdown()
        try:
            await super().close()
        finally:
            if self._saved_endpoints is not None:
                Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = self._saved_endpoints
                self._saved_endpoints = None


def create_bot(services: Services, **options: Any) -> ReactBot:
    """The bot, not yet connected: ``await bot.start(token)`` logs in and runs it."""
    return ReactBot(services, **options)
