"""The Slack side of the live message: ``chat.postMessage``, ``chat.update``, thread replies.

Errors, mapped at this boundary::

    SlackApiError 429 / "ratelimited"   -> adapters.live.RateLimited(retry_after, shared=True)
                                           (Slack limits a method per workspace: all channels wait)
    transport errors, HTTP 5xx,
    Slack's own transient errors        -> adapters.live.EditDeferred(short back-off)
    "msg_too_long"                      -> the same update, shortened, sent again; once
                                           shortening is exhausted, EditRejected
    the payload refused ("invalid_blocks",
    "msg_blocks_too_long", "invalid_arguments", any other client-side error)
                                        -> adapters.live.EditRejected (LiveMessage sends a
                                           compact rendering, then plain text)
    message/channel gone, token refused -> logged; the edit is dropped (no payload can help)
    not_in_channel on the root post     -> NotInChannel (the user is told how to invite the bot)

Trace posts: a refused post is shortened, then sent as plain text, then skipped; the thread
goes on either way. Only a gone channel or a refused token ends it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient

from adapters import words
from adapters.live import EditDeferred, EditRejected, RateLimited
from adapters.slack.blocks import SlackMessage, context, fit, prose
from adapters.slack.settings import SlackSettings
from adapters.slack.trace_thread import shorten
from core.errors import ReactbotError
from core.pictures import pictures_of
from core.trace import Trace

log = logging.getLogger(__name__)

TRANSIENT_BACKOFF = 1.0
MAX_REPLY_WAIT = 30.0
"""The longest a trace post waits on a Retry-After before trying again."""
PACED_METHODS = ("chat.update", "chat.startStream", "chat.appendStream", "chat.stopStream")
"""Methods whose 429s go to an EditPacer instead of being retried inside slack_sdk."""

_GONE = frozenset(
    {
        "message_not_found",
        "cant_update_message",
        "channel_not_found",
        "is_archived",
        "is_inactive",
        "not_in_channel",
        "edit_window_closed",
        "restricted_action",
        "restricted_action_read_only_channel",
        "restricted_action_thread_locked",
        "restricted_action_thread_only_channel",
        "restricted_action_non_threadable_channel",
        "cannot_reply_to_message",
        "team_not_found",
    }
)
"""The message or channel is gone or closed to the bot: no payload can help."""
_AUTH = frozenset(
    {
        "not_authed",
        "invalid_auth",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "missing_scope",
        "no_permission",
        "not_allowed_token_type",
        "access_denied",
        "ekm_access_denied",
        "org_login_required",
        "team_added_to_org",
        "two_factor_setup_required",
        "enterprise_is_restricted",
    }
)
"""The token is refused: no payload can help, and the operator must act (logged as errors)."""
_TRANSIENT = frozenset(
    {
        "internal_error",
        "fatal_error",
        "service_unavailable",
        "request_timeout",
        "update_failed",
        "external_channel_migrating",
        "streaming_state_conflict",
    }
)
"""Slack's side, for now: the same payload may be taken later."""
_TOO_LONG = frozenset({"msg_too_long", "msg_blocks_too_long", "invalid_blocks"})
"""Refusals a shorter payload may get past (``shorten`` cuts every text in half)."""
_NOT_JOINED = frozenset({"not_in_channel", "channel_not_found"})
PLAIN_TEXT_LIMIT = 3_900
"""A plain-text trace post: under Slack's 4,000 characters of ``text``."""


class NotInChannel(ReactbotError):
    """The bot cannot post in this channel (it has not been invited)."""


class PacedRateLimitRetryHandler(AsyncRateLimitErrorRetryHandler):
    """slack_sdk's 429 retry handler (sleeps Retry-After, then retries), except for
    ``chat.update``: those 429s must reach the EditPacer, which delays the whole channel
    rather than one request and keeps coalescing updates meanwhile."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if request.url.rstrip("/").endswith(PACED_METHODS):
            return False
        return await super()._can_retry_async(
            state=state, request=request, response=response, error=error
        )


def make_client(
    settings: SlackSettings, *, session: aiohttp.ClientSession | None = None
) -> AsyncWebClient:
    """The Web API client. Pass a shared ``session``: without one slack_sdk opens a new
    connection (and TLS handshake) for every call, which a live message makes every second."""
    handlers: list[AsyncRetryHandler] = [
        AsyncConnectionErrorRetryHandler(max_retry_count=2),
        PacedRateLimitRetryHandler(max_retry_count=3),
    ]
    return AsyncWebClient(
        token=settings.bot_token,
        base_url=settings.base_url,
        retry_handlers=handlers,
        session=session,
    )


def api_error(exc: SlackApiError) -> str:
    data = getattr(exc.response, "data", None)
    return str(data.get("error", "")) if isinstance(data, dict) else ""


def retry_after(exc: SlackApiError, default: float = 1.0) -> float:
    headers: Any = getattr(exc.response, "headers", None) or {}
    raw = headers.get("Retry-After") or headers.get("retry-after")
    if isinstance(raw, list):
        raw = raw[0] if raw else None
    try:
        return max(0.0, float(raw)) if raw is not None else default
    except ValueError:
        return default


def is_rate_limited(exc: SlackApiError) -> bool:
    return getattr(exc.response, "status_code", None) == 429 or api_error(exc) == "ratelimited"


async def post_root(
    client: AsyncWebClient, *, channel: str, thread_ts: str | None, message: SlackMessage
) -> str:
    """Posts the placeholder; returns its ``ts``. Blocks Slack refuses are replaced by the
    notification text alone: without a placeholder the asker would see nothing at all."""
    try:
        return await _post_message(client, channel, thread_ts, message.kwargs())
    except SlackApiError as exc:
        error = api_error(exc)
        if error in _NOT_JOINED:
            raise NotInChannel(f"cannot post in {channel}: {error}") from exc
        if not _payload_refused(exc):
            raise
        log.error("the placeholder in %s was refused (%s); posting its text alone", channel, error)
    return await _post_message(
        client, channel, thread_ts, {"text": fit(message.text, PLAIN_TEXT_LIMIT)}
    )


async def _post_message(
    client: AsyncWebClient, channel: str, thread_ts: str | None, content: dict[str, Any]
) -> str:
    response = await client.chat_postMessage(
        channel=channel, thread_ts=thread_ts, unfurl_links=False, unfurl_media=False, **content
    )
    return str(response["ts"])


def _payload_refused(exc: SlackApiError) -> bool:
    """Slack refused what was sent, not who sent it or where (a smaller payload may pass)."""
    error = api_error(exc)
    status = getattr(exc.response, "status_code", 200)
    transient = error in _TRANSIENT or status >= 500 or is_rate_limited(exc)
    return not transient and error not in _GONE and error not in _AUTH


class SlackSurface:
    """``adapters.live.Surface[SlackMessage]`` bound to one posted message."""

    MAX_SHORTENINGS = 3

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        channel: str,
        ts: str,
        thread_ts: str | None = None,
        upload_trace_json: bool = True,
    ) -> None:
        self.client = client
        self.channel = channel
        self.ts = ts
        self.thread_ts = thread_ts or ts
        """Replies go into the thread the message is in, or open one on it."""
        self.upload_trace_json = upload_trace_json
        self.dropped_edits = 0
        self.extra_requests = 0
        """``chat.update`` calls beyond one per edit (shortened retries), for the pacer."""

    @property
    def channel_key(self) -> str:
        return self.channel

    async def edit(self, payload: SlackMessage) -> None:
        message = payload
        for attempt in range(self.MAX_SHORTENINGS + 1):
            if attempt:  # a retry is one more chat.update the workspace budget counts
                self.extra_requests += 1
            try:
                await self.client.chat_update(channel=self.channel, ts=self.ts, **message.kwargs())
                return
            except SlackApiError as exc:
                if not self._shorten_after(exc):
                    return
                message = shorten(message)  # only msg_too_long comes back here
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise EditDeferred(TRANSIENT_BACKOFF, f"chat.update failed: {exc!r}") from exc
        raise EditRejected(f"chat.update: msg_too_long after {self.MAX_SHORTENINGS} shortenings")

    def _shorten_after(self, exc: SlackApiError) -> bool:
        """True when the edit should be retried shortened; False when it is dropped (the
        message is gone); raises when it should wait or when the payload itself is refused."""
        error = api_error(exc)
        if is_rate_limited(exc):
            raise RateLimited(retry_after(exc), shared=True) from exc
        if error == "msg_too_long":
            return True
        if error in _TRANSIENT or getattr(exc.response, "status_code", 200) >= 500:
            raise EditDeferred(TRANSIENT_BACKOFF, f"chat.update failed: {error}") from exc
        if error in _GONE or error in _AUTH:
            self.dropped_edits += 1
            level = logging.WARNING if error in _GONE else logging.ERROR
            log.log(level, "chat.update of %s in %s failed: %s", self.ts, self.channel, error)
            return False
        raise EditRejected(f"chat.update refused the payload: {error or exc}") from exc

    async def post_trace(self, trace: Trace, posts: Sequence[SlackMessage]) -> None:
        await self._upload_pictures(trace)
        for post in posts:
            if not await self._reply(post):
                return
        if self.upload_trace_json:
            await self._upload_json(trace)

    async def _reply(self, post: SlackMessage) -> bool:
        """Posts ``post`` in the thread: shortened when Slack finds it too long, as plain text
        when it still refuses, skipped when even that fails. False when the thread cannot go
        on (the channel is gone or the token refused)."""
        message: SlackMessage | None = post
        for _ in range(self.MAX_SHORTENINGS + 1):
            if message is None:
                break
            try:
                await self._post(message.kwargs())
                return True
            except SlackApiError as exc:
                error = api_error(exc)
                if error in _GONE or error in _AUTH:
                    log.error("the trace thread in %s stopped: %s", self.channel, error)
                    return False
                if is_rate_limited(exc):  # still, after slack_sdk's own retries
                    await asyncio.sleep(min(retry_after(exc), MAX_REPLY_WAIT))
                elif error in _TRANSIENT or getattr(exc.response, "status_code", 200) >= 500:
                    await asyncio.sleep(TRANSIENT_BACKOFF)
                else:
                    message = shorten(message) if error in _TOO_LONG else None
            except (aiohttp.ClientError, TimeoutError) as exc:
                log.warning("a trace post in %s failed (%r); skipped", self.channel, exc)
                return True
        return await self._reply_plain(post)

    async def _reply_plain(self, post: SlackMessage) -> bool:
        text = fit("\n".join(_texts(post)) or post.text, PLAIN_TEXT_LIMIT)
        try:
            await self._post({"text": text})
        except SlackApiError as exc:
            error = api_error(exc)
            log.error(
                "a trace post in %s was refused even as plain text (%s); skipped",
                self.channel,
                error,
            )
            return error not in _GONE and error not in _AUTH
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("a trace post in %s failed (%r); skipped", self.channel, exc)
        return True

    async def _post(self, content: dict[str, Any]) -> None:
        await _post_message(self.client, self.channel, self.thread_ts, content)

    async def _upload_pictures(self, trace: Trace) -> None:
        """The pictures the run's tools returned (``core.pictures``), first in the answer's
        thread: one upload (files.getUploadURLExternal, then completeUploadExternal)."""
        pictures = pictures_of(trace)
        if not pictures:
            return
        try:
            await self.client.files_upload_v2(
                channel=self.channel,
                thread_ts=self.thread_ts,
                file_uploads=[
                    {"content": p.data, "filename": p.name, "title": p.name} for p in pictures
                ],
            )
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("the pictures of trace %s not uploaded: %s", trace.id, exc)
            await self._reply(
                SlackMessage(words.PICTURES_NOT_SENT, (context(words.PICTURES_NOT_SENT),))
            )

    async def _upload_json(self, trace: Trace) -> None:
        """The trace as a .json file in the thread, for anyone who wants to replay it."""
        try:
            await self.client.files_upload_v2(
                channel=self.channel,
                thread_ts=self.thread_ts,
                content=trace.to_json(indent=2),
                filename=f"trace-{trace.id}.json",
                title=f"Trace {trace.id} (JSON)",
            )
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            # Usually the files:write scope is missing; say where the trace can be had instead.
            # (SlackRequestError, also a SlackClientError, is an upload URL that refused.)
            log.warning("trace %s JSON not uploaded: %s", trace.id, exc)
            note = (
                f"The trace JSON could not be attached here (does the app have `files:write`?). "
                f"It is stored: `reactbot trace show {prose(trace.id, 40)}`."
            )
            await self._reply(SlackMessage(note, (context(note),)))


def _texts(message: SlackMessage) -> list[str]:
    """The mrkdwn of every block, in order (already rendered, so safe to send as text)."""
    out: list[str] = []
    for block in message.blocks:
        text = block.get("text")
        if isinstance(text, dict) and isinstance(text.get("text"), str):
            out.append(text["text"])
        out += [
            e["text"]
            for e in block.get("elements", ())
            if isinstance(e, dict) and isinstance(e.get("text"), str)
        ]
    return out
