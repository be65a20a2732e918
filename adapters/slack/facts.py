"""What the Slack bot looks up about its workspace, apart from any one event: who is in the
allowed channels (``ChannelMembers``), and the budget every channel's ``chat.update`` draws
on (``workspace_budget``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.pacing import Budget, per_minute
from adapters.slack.settings import SlackSettings

log = logging.getLogger(__name__)


class ChannelMembers:
    """Who is in the allowed channels (``conversations.members``, every page), remembered for
    ``ttl`` seconds: DMs to a bot restricted to some channels are answered for their members.

    Needs the ``channels:read`` scope (``groups:read`` for private channels); without it the
    look-up fails closed, and the log says which scope is missing.
    """

    def __init__(self, client: AsyncWebClient, *, ttl: float = 300.0) -> None:
        self._client = client
        self._ttl = ttl
        self._known: dict[str, tuple[float, frozenset[str]]] = {}

    async def in_any(self, user: str, channels: Iterable[str]) -> bool:
        for channel in sorted(channels):
            if user in await self._members(channel):
                return True
        return False

    async def _members(self, channel: str) -> frozenset[str]:
        now = time.monotonic()
        known = self._known.get(channel)
        if known is not None and known[0] > now:
            return known[1]
        members: set[str] = set()
        try:
            async for page in await self._client.conversations_members(channel=channel, limit=1000):
                members.update(str(m) for m in page.get("members", ()))
        except SlackApiError as exc:
            error = exc.response.get("error") if exc.response is not None else ""
            log.warning(
                "cannot list the members of %s (%s): DMs are refused meanwhile", channel, error
            )
            return frozenset()
        found = frozenset(members)
        self._known[channel] = (now + self._ttl, found)
        return found


def workspace_budget(settings: SlackSettings, shared: Budget | None = None) -> Budget | None:
    """Slack limits ``chat.update`` per workspace (Tier 3, "50+ per minute"), so every channel
    draws on one budget: at most that many in any minute, across every replica when
    ``shared`` (Redis) is given, with each replica keeping to it alone while Redis is away."""
    limit = settings.workspace_updates_per_minute
    return per_minute(int(limit), shared) if limit > 0 else None
