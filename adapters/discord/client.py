"""The bot: an ``AutoShardedBot`` (ready for sharding) carrying the ``AskCog``.

``api_base_url`` replaces discord.py's REST base (``Route.BASE``) and the gateway address is
then asked from that base (``GET /gateway/bot``), never the hard-coded one, so a proxy or a
local fake sees every call. Both are class attributes in discord.py, so they are set when
the bot logs in and restored when it closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import discord
import yarl
from discord.ext import commands
from discord.gateway import DiscordWebSocket
from discord.http import Ratelimit, Route

from adapters.discord.cog import AskCog, Services
from adapters.discord.surface import NO_MENTIONS, RateLimitWatch
from adapters.dispatch.schedule import ScheduleDesk

log = logging.getLogger(__name__)

MAX_RATELIMIT_WAIT = 30.0
"""Longer 429 waits raise (and LiveMessage postpones) instead of blocking inside discord.py."""


BUCKET_SWEEP_SECONDS = 30.0
"""How often idle rate-limit buckets are looked for (see ``BucketSweep``)."""
BUCKET_IDLE_SECONDS = 30.0
"""A bucket unused this long, whose window has reset, is dropped (discord.py: 5 minutes)."""


class BucketSweep:
    """discord.py's ``HTTPClient`` keeps a rate-limit bucket per route and channel. Once it
    holds 256, it scans every bucket each time it makes a new one, and drops those unused
    for 5 minutes. Each answer's trace thread is a new channel, so a busy bot makes a bucket
    per answer: at 1,000 conversations (``bench/soak.py``) the scan took 15% of the process,
    and the buckets of the last 5 minutes (tens of thousands, four objects each) lengthened
    every full garbage collection.

    This replaces that scan: at most once every ``BUCKET_SWEEP_SECONDS``, it drops the
    buckets unused for ``BUCKET_IDLE_SECONDS`` with nothing in flight or waiting and whose
    window has reset. Such a bucket holds nothing discord.py would not learn again from the
    next answer's headers (a window that has reset is reset by discord.py before its next
    use anyway).
    """

    def __init__(self, http: Any, clock: Callable[[], float]) -> None:
        self._http = http  # its ``_buckets`` is read at each sweep, never kept
        self._clock = clock
        self._next = 0.0

    @classmethod
    def install(cls, http: Any) -> bool:
        """Replace ``http``'s scan; False (and left alone) if this discord.py has none."""
        if not callable(getattr(http, "_try_clear_expired_ratelimits", None)):
            return False
        buckets = getattr(http, "_buckets", None)
        if not isinstance(buckets, dict) or not _slots(Ratelimit) >= _BUCKET_FIELDS:
            return False
        http._try_clear_expired_ratelimits = cls(http, _loop_time)
        return True

    def __call__(self) -> None:
        now = self._clock()
        if now < self._next:
            return
        self._next = now + BUCKET_SWEEP_SECONDS
        buckets = self._http._buckets
        for key in [key for key, bucket in buckets.items() if _idle(bucket, now)]:
            del buckets[key]


_BUCKET_FIELDS = frozenset({"outgoing", "expires", "_last_request", "_pending_requests"})


def _loop_time() -> float:
    """The clock discord.py stamps its buckets with (called from its requests, in the loop)."""
    return asyncio.get_running_loop().time()


def _slots(cls: type) -> frozenset[str]:
    return frozenset(getattr(cls, "__slots__", ()))


def _idle(bucket: Ratelimit, now: float) -> bool:
    return (
        bucket.outgoing == 0
        and not bucket._pending_requests
        and now - bucket._last_request >= BUCKET_IDLE_SECONDS
        and (bucket.expires is None or bucket.expires <= now)
    )


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
            # No message cache: the bot reads no cached message (replies, edits and buttons
            # come with their own payloads), and discord.py's default 1,000 messages are
            # objects every full garbage collection walks.
            max_messages=None,
            **options,
        )
        BucketSweep.install(self.http)
        self.cog: AskCog | None = None
        self.schedules: ScheduleDesk | None = None
        """The schedule command's handler, while ``serve`` runs schedules."""
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
