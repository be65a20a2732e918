"""A thread's or channel's earlier messages on Slack, for a mention (``adapters.context``).

In a thread: ``conversations.replies`` (the parent and its replies, oldest first, up to the
question); at the top of a channel: ``conversations.history`` (newest first, before the
question). One page each, ``limit`` at most ``PAGE``: bounded, and paced by Slack's own
``Retry-After`` (the client's rate-limit handler) within the pipeline's read timeout.

Scopes: ``channels:history`` (public channels), ``groups:history`` (private), ``im:history``
and ``mpim:history``; without one Slack answers ``missing_scope`` and the asker is told once.
Authors' display names come from ``users.info`` (``users:read``), remembered; without it the
user id stands in.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.context import Read, Said
from adapters.slack.payloads import Question, mentions_bot, plain_text

log = logging.getLogger(__name__)

PAGE = 100
"""Messages asked for in one call (Slack: "no more than 1000", 200 recommended)."""
READABLE_SUBTYPES = frozenset({"", "thread_broadcast", "file_share", "me_message", "bot_message"})
"""Messages people (or other bots) wrote; joins, topic changes and edits are not read."""
NAMES_KEPT = 5000

REFUSED = {
    "missing_scope": (
        "⚠️ I can't read the earlier messages here (the app lacks the `{needed}` scope), "
        "so I answered from your message alone."
    ),
    "not_in_channel": (
        "⚠️ I can't read the earlier messages here (I'm not a member of this channel), "
        "so I answered from your message alone."
    ),
}


class SlackHistory:
    """Reads for one bot: its client, its own ids (its posts are never read back)."""

    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self._names: OrderedDict[str, str] = OrderedDict()
        self._channels: OrderedDict[str, str] = OrderedDict()

    async def read(self, question: Question, *, limit: int, bot_user_id: str | None) -> Read:
        """Up to ``limit`` messages before ``question`` in its thread (or channel), none of
        them the bot's own (``bot_user_id``)."""
        try:
            # room for what is left out (the bot's own posts, joins): still one bounded page
            messages = await self._fetch(question, min(max(limit, 1) * 2 + 1, PAGE))
        except SlackApiError as exc:
            return Read(refused=_refusal(exc))
        said = [s for m in messages if (s := await self._said(m, bot_user_id)) is not None]
        return Read(tuple(said[-limit:]))

    async def _fetch(self, question: Question, limit: int) -> list[dict[str, Any]]:
        before = question.message_ts
        if question.thread_ts:
            # oldest first, the parent included; one more than asked, as the question is one
            answer = await self._client.conversations_replies(
                channel=question.channel, ts=question.thread_ts, limit=limit + 1
            )
            found = list(answer.get("messages") or [])
        else:
            answer = await self._client.conversations_history(
                channel=question.channel, latest=before, inclusive=False, limit=limit
            )
            found = list(reversed(answer.get("messages") or []))  # newest first from Slack
        return [m for m in found if isinstance(m, dict) and _before(m, before)]

    async def _said(self, message: Mapping[str, Any], bot_user_id: str | None) -> Said | None:
        if str(message.get("subtype") or "") not in READABLE_SUBTYPES:
            return None
        user = str(message.get("user") or "")
        if bot_user_id is not None and user == bot_user_id:
            return None  # our own answers and trace posts: the history has the answers
        if mentions_bot(str(message.get("text") or ""), bot_user_id=bot_user_id):
            return None  # a question to the bot: answered in a conversation of its own
        text = plain_text(str(message.get("text") or ""), bot_user_id=bot_user_id)
        if not text:
            return None
        try:
            at = float(str(message.get("ts") or 0))
        except ValueError:
            at = 0.0
        name = await self.user_name(user) if user else _bot_name(message)
        return Said(author=name, at=at, text=text)

    async def named(self, question: Question) -> Question:
        """``question`` with its asker's display name and its channel's name, where Slack
        gives them (``users:read``, ``channels:read``; remembered); the ids stand in
        otherwise, and a command's own names are kept."""
        user_name = question.user_name or await self.user_name(question.user)
        channel_name = question.channel_name
        if not channel_name:
            channel_name = "DM" if question.is_dm else await self.channel_name(question.channel)
        return dataclasses.replace(question, user_name=user_name, channel_name=channel_name)

    async def channel_name(self, channel: str) -> str:
        """``#general``; "" when Slack does not say (no ``channels:read``, a DM)."""
        known = self._channels.get(channel)
        if known is not None:
            return known
        name = ""
        try:
            answer = await self._client.conversations_info(channel=channel)
            found = (answer.get("channel") or {}).get("name")
            name = f"#{found}" if isinstance(found, str) and found else ""
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            log.info("no name for channel %s (%s): its id stands in", channel, exc)
        _remember(self._channels, channel, name)
        return name

    async def user_name(self, user: str) -> str:
        known = self._names.get(user)
        if known is not None:
            return known
        name = user
        try:
            answer = await self._client.users_info(user=user)
            profile = (answer.get("user") or {}).get("profile") or {}
            name = str(profile.get("display_name") or profile.get("real_name") or user)
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            log.info("no display name for %s (%s): its id stands in", user, exc)
        _remember(self._names, user, name)
        return name


def _remember(names: OrderedDict[str, str], key: str, name: str) -> None:
    names[key] = name
    while len(names) > NAMES_KEPT:
        names.popitem(last=False)


def _before(message: Mapping[str, Any], ts: str | None) -> bool:
    """Sent before the question (the question itself and anything after it are not read)."""
    if ts is None:
        return True
    try:
        return float(str(message.get("ts") or 0)) < float(ts)
    except ValueError:
        return False


def _bot_name(message: Mapping[str, Any]) -> str:
    profile = message.get("bot_profile") or {}
    return str(message.get("username") or profile.get("name") or "a bot")


def _refusal(exc: SlackApiError) -> str:
    data = exc.response.data if exc.response is not None else {}
    error = str(data.get("error", "")) if isinstance(data, dict) else ""
    needed = str(data.get("needed", "")) if isinstance(data, dict) else ""
    log.warning("could not read the earlier messages: %s %s", error, needed)
    template = REFUSED.get(error)
    if template is None:
        return f"⚠️ I couldn't read the earlier messages here ({error or 'Slack refused'})."
    return template.format(needed=needed or "channels:history")
