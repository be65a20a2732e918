"""What the bot knows about a Slack channel beyond an event's payload, looked up through the
Web API and remembered for a while: who is in it (``ChannelMembers``, for DMs to a bot
restricted to some channels) and whether it is closed (``SlackPlaces``, for the travel rule
of memories, ``core.memories.recallable``).

An ``app_mention`` carries no ``channel_type``, so a private channel and a group DM look
like any channel; ``conversations.info`` says (``is_private``, ``is_mpim``, ``is_im``). A
person's fact told in a closed channel is recalled there only, never in the workspace's
open channels. Each look-up fails closed: a channel Slack will not describe (no
``groups:read`` / ``mpim:read`` for it, ``channel_not_found``, Slack away) counts as closed,
and the log says why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.dispatch.access import Membership
from adapters.policy import AccessPolicy
from adapters.slack.payloads import Question

log = logging.getLogger(__name__)

DESCRIBED_WITHIN = 2.0
"""Seconds a question waits for ``conversations.info`` (as long as for the names); past
them the channel counts as closed for that question, and the next one asks again."""
TRANSIENT = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
"""Slack's errors that say nothing about the channel: not remembered (asked again)."""
PLACES_KEPT = 5000
"""Channels whose privacy one process remembers (the least recently asked go first)."""


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

    async def of(self, user: str, access: AccessPolicy) -> tuple[Membership, ...]:
        """The allowed channels ``user`` is in, for the shared access rule's DM check
        (``adapters.dispatch.access.Members``; it asks only then)."""
        return tuple(
            [Membership(place=c) for c in sorted(access.places) if user in await self._members(c)]
        )

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


def closed_channel(info: Mapping[str, Any]) -> bool:
    """Whether ``conversations.info``'s channel object is one only some of the workspace
    see: a private channel, a group DM (or a DM). Only an explicit ``is_private: false``
    on a channel that is none of those is open."""
    if info.get("is_im") is True or info.get("is_mpim") is True:
        return True
    return info.get("is_private") is not False


@dataclasses.dataclass(frozen=True, slots=True)
class Described:
    closed: bool
    name: str = ""
    """``#general``; "" when Slack did not say."""
    shared: bool = False
    """Shared beyond the workspace (Slack Connect, or other workspaces of an org)."""


class SlackPlaces:
    """Whether a channel is closed, from ``conversations.info`` (``channels:read``; for
    private channels ``groups:read``, for group DMs ``mpim:read``), remembered per channel
    for ``ttl`` seconds: a channel made private is read as closed within that time. The same
    answer names the channel for the trace (one call for both)."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._ttl = ttl
        self._clock = clock
        self._known: OrderedDict[str, tuple[float, Described]] = OrderedDict()

    async def placed(self, question: Question) -> Question:
        """``question`` with its channel's closedness (and name) looked up; a DM is
        private already."""
        if question.is_dm:
            return question
        found = await self.described(question.channel)
        name = question.channel_name or found.name
        return dataclasses.replace(
            question, closed=found.closed, shared=found.shared, channel_name=name
        )

    async def closed(self, channel: str) -> bool:
        return (await self.described(channel)).closed

    async def described(self, channel: str, *, within: float = DESCRIBED_WITHIN) -> Described:
        """What Slack says of ``channel`` (remembered), within ``within`` seconds."""
        now = self._clock()
        known = self._known.get(channel)
        if known is not None and known[0] > now:
            self._known.move_to_end(channel)
            return known[1]
        try:
            async with asyncio.timeout(within):
                answer = await self._client.conversations_info(channel=channel)
        except SlackApiError as exc:  # Slack's answer, not passing: kept like a success
            data = exc.response.data if exc.response is not None else {}
            detail = data if isinstance(data, dict) else {}
            log.warning(
                "cannot tell whether Slack channel %s is private (%s%s): it counts as private "
                "for memories",
                channel,
                detail.get("error", "refused"),
                f", needs {detail['needed']}" if detail.get("needed") else "",
            )
            if detail.get("error") in TRANSIENT:
                return Described(closed=True)
            found = Described(closed=True)
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("Slack did not describe channel %s (%s): private for now", channel, exc)
            return Described(closed=True)  # not remembered: the next question asks again
        else:
            info = answer.get("channel")
            found = described(info if isinstance(info, dict) else {})
        self._known[channel] = (now + self._ttl, found)
        while len(self._known) > PLACES_KEPT:
            self._known.popitem(last=False)
        return found


SHARED_FLAGS = ("is_shared", "is_ext_shared", "is_org_shared", "is_pending_ext_shared")
"""``conversations.info``'s marks of a channel read beyond its workspace."""


def described(info: Mapping[str, Any]) -> Described:
    name = info.get("name")
    shared = any(info.get(flag) is True for flag in SHARED_FLAGS)
    return Described(
        closed_channel(info), f"#{name}" if isinstance(name, str) and name else "", shared
    )
