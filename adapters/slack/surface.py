"""The Slack side of the live message: ``chat.postMessage``, ``chat.update``, thread replies.

Errors, mapped at this boundary::

    SlackApiError 429 / "ratelimited"   -> adapters.live.RateLimited(retry_after, shared=True)
                                           (Slack limits a method per workspace: all channels wait)
    transport errors, HTTP 5xx          -> adapters.live.EditDeferred(short back-off)
    "msg_too_long"                      -> the same update, shortened, sent again
    message/channel gone, bad blocks    -> logged; the edit is dropped (retrying cannot help)
    not_in_channel on the root post     -> NotInChannel (the user is told how to invite the bot)

"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient

from adapters.live import EditDeferred, RateLimited
from adapters.slack.render import SlackMessage, context, escape, shorten
from adapters.slack.settings import SlackSettings
from core.errors import ReactbotError
from core.trace import Trace

log = logging.getLogger(__name__)

TRANSIENT_BACKOFF = 1.0
PACED_METHODS = ("chat.update",)
"""Methods whose 429s go to the EditPacer instead of being retried inside slack_sdk."""

_GONE = frozenset(
    {
        "message_not_found",
        "cant_update_message",
        "channel_not_found",
        "is_archived",
        "not_in_channel",
        "invalid_blocks",
        "edit_window_closed",
    }
)
_NOT_JOINED = frozenset({"not_in_channel", "channel_not_found"})


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
    """Posts the placeholder; returns its ``ts``."""
    try:
        response = await client.chat_postMessage(
            channel=channel,
            thread_ts=thread_ts,
            unfurl_links=False,
            unfurl_media=False,
            **message.kwargs(),
        )
    except SlackApiError as exc:
        if api_error(exc) in _NOT_JOINED:
            raise NotInChannel(f"cannot post in {channel}: {api_error(exc)}") from exc
        raise
    return str(response["ts"])


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

    @property
    def channel_key(self) -> str:
        return self.channel

    async def edit(self, payload: SlackMessage) -> None:
        message = payload
        for _ in range(self.MAX_SHORTENINGS + 1):
            try:
                await self.client.chat_update(channel=self.channel, ts=self.ts, **message.kwargs())
                return
            except SlackApiError as exc:
                if not self._handle_edit_error(exc):
                    return
                message = shorten(message)  # only msg_too_long comes back here
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise EditDeferred(TRANSIENT_BACKOFF, f"chat.update failed: {exc!r}") from exc
        # Shortening did not help: the text fallback alone is always accepted.
        await self.client.chat_update(
            channel=self.channel, ts=self.ts, text=message.text, blocks=[]
        )

    def _handle_edit_error(self, exc: SlackApiError) -> bool:
        """True when the edit should be retried shortened; raises when it should wait."""
        error = api_error(exc)
        if is_rate_limited(exc):
            raise RateLimited(retry_after(exc), shared=True) from exc
        if error == "msg_too_long":
            return True
        if getattr(exc.response, "status_code", 200) >= 500:
            raise EditDeferred(TRANSIENT_BACKOFF, f"chat.update failed: {error}") from exc
        self.dropped_edits += 1
        level = logging.WARNING if error in _GONE else logging.ERROR
        log.log(level, "chat.update of %s in %s failed: %s", self.ts, self.channel, error)
        return False

    async def post_trace(self, trace: Trace, posts: Sequence[SlackMessage]) -> None:
        for post in posts:
            await self._reply(post)
        if self.upload_trace_json:
            await self._upload_json(trace)

    async def _reply(self, post: SlackMessage) -> None:
        message = post
        for _ in range(self.MAX_SHORTENINGS + 1):
            try:
                await self.client.chat_postMessage(
                    channel=self.channel,
                    thread_ts=self.thread_ts,
                    unfurl_links=False,
                    unfurl_media=False,
                    **message.kwargs(),
                )
                return
            except SlackApiError as exc:
                if api_error(exc) != "msg_too_long":
                    raise
                message = shorten(message)
        log.error("a trace post stayed too long after shortening; skipped")

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
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            # Usually the files:write scope is missing; say where the trace can be had instead.
            log.warning("trace %s JSON not uploaded: %s", trace.id, exc)
            note = (
                f"The trace JSON could not be attached here (does the app have `files:write`?). "
                f"It is stored: `reactbot trace show {escape(trace.id)}`."
            )
            await self._reply(SlackMessage(note, (context(note),)))
