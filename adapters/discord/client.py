"""The bot: an ``AutoShardedBot`` (ready for sharding) carrying the ``AskCog``.

``api_base_url`` replaces discord.py's REST base (``Route.BASE``) and the gateway address is
then asked from that base (``GET /gateway/bot``), never the hard-coded one, so a proxy or a
local fake sees every call. Both are class attributes in discord.py, so they are set when
the bot logs in and restored when it closes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
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


BUCKET_SWEEP_SECONDS = 30.0
"""How often discord.py's scan for idle rate-limit buckets may run (see ``BucketSweep``)."""


class BucketSweep:
    """discord.py's ``HTTPClient`` keeps a rate-limit bucket per route and channel, and once
    it holds 256 it scans every bucket for ones idle 5 minutes each time it makes a new one.
    Each answer's trace thread is a new channel, so a busy bot makes new buckets all the time
    and the scan grows with them: at 1,000 conversations (``bench/soak.py``) it took 15% of
    the process. This runs the same scan at most once every ``BUCKET_SWEEP_SECONDS``, so idle
    buckets still go, at most that much later.
    """

    def __init__(self, sweep: Callable[[], None], clock: Callable[[], float]) -> None:
        self._sweep = sweep
        self._clock = clock
        self._next = 0.0

    @classmethod
    def install(cls, http: Any) -> bool:
        """Wrap ``http``'s scan; False (and left alone) if this discord.py has none."""
        sweep = getattr(http, "_try_clear_expired_ratelimits", None)
        if not callable(sweep):
            return False
        http._try_clear_expired_ratelimits = cls(sweep, time.monotonic)
        return True

    def __call__(self) -> None:
        now = self._clock()
        if now >= self._next:
            self._next = now + BUCKET_SWEEP_SECONDS
            self._sweep()


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
        BucketSweep.install(self.http)
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
