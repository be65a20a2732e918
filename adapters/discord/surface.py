"""The live-message Surface on discord.py messages, and how our pacer learns about 429s.

discord.py retries a 429 itself: it sleeps ``retry_after`` and sends the same request again,
raising ``discord.RateLimited`` only when the wait exceeds ``max_ratelimit_timeout`` (30 s at
the least). Our pacer would never hear of the short ones, so ``RateLimitWatch`` observes every
response through aiohttp tracing (``Client(http_trace=...)``) and postpones the channel the
request was made for. The edit in flight is still delivered by discord.py's retry; the next
one waits for the channel's postponed slot. Long waits surface as ``adapters.live.RateLimited``
so LiveMessage postpones and coalesces instead of blocking.

Other refusals, mapped at this boundary:

- 400 (or 413) on an edit: Discord refused the payload itself (``Invalid Form Body`` 50035,
  ``Cannot send an empty message`` 50006...). Sending it again cannot help, so the edit raises
  ``adapters.live.EditRejected`` and LiveMessage sends a smaller form instead.
- 401 50027 ``Invalid Webhook Token`` on an interaction's message: its token lives 15 minutes,
  and a run may outlive it. The surface then edits the same message through the bot token's
  channel route (``PATCH /channels/{channel}/messages/{message}``) from there on.
- A refused thread (403 Missing Permissions, or a 400) gets the trace attached to a reply
  instead; one refused post in the thread is logged and replaced by a short note, and the
  other posts still go.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from types import SimpleNamespace
from typing import Any, Literal

import aiohttp
import discord

from adapters.discord.render import DiscordPayload, FileSpec, PendingButtons, thread_name
from adapters.live import EditRejected, RateLimited
from core.trace import Trace

log = logging.getLogger(__name__)

NO_MENTIONS = discord.AllowedMentions.none()
THREAD_ARCHIVE_MINUTES: Literal[60, 1440, 4320, 10080] = 1440

Sendable = discord.abc.Messageable


class RateLimitWatch:
    """Counts every 429 the bot's HTTP session receives and reports it for the current scope."""

    def __init__(self, on_hit: Callable[[str, float], None]) -> None:
        self._on_hit = on_hit
        # Set around each edit: aiohttp runs trace hooks in the requesting task's context.
        self._scope: ContextVar[str | None] = ContextVar(
            f"ratelimit-scope-{id(self)}", default=None
        )
        self.hits = 0
        self.trace_config = aiohttp.TraceConfig()
        self.trace_config.on_request_end.append(self._on_request_end)

    @contextlib.contextmanager
    def scope(self, channel_key: str) -> Iterator[None]:
        token = self._scope.set(channel_key)
        try:
            yield
        finally:
            self._scope.reset(token)

    async def _on_request_end(
        self,
        session: aiohttp.ClientSession,
        context: SimpleNamespace,
        params: aiohttp.TraceRequestEndParams,
    ) -> None:
        if params.response.status != 429:
            return
        self.hits += 1
        key = self._scope.get()
        if key is not None:
            self._on_hit(key, retry_after_of(params.response.headers))


def retry_after_of(headers: Any) -> float:
    """Seconds to wait from a 429's headers (Discord sends both; either will do)."""
    for name in ("X-RateLimit-Reset-After", "Retry-After"):
        value = headers.get(name) if headers is not None else None
        if value is not None:
            with contextlib.suppress(ValueError):
                return max(0.0, float(value))
    return 1.0


def to_files(files: Sequence[FileSpec]) -> list[discord.File]:
    return [discord.File(io.BytesIO(f.data), filename=f.name) for f in files]


PAYLOAD_REFUSED = frozenset({400, 413})
"""Statuses with which Discord refuses a request's body (form errors, an empty message, a
request entity too large): the same body will never be accepted."""
REFUSED_POST_NOTE = "-# (Discord refused this part of the trace.)"


def describe(exc: discord.HTTPException) -> str:
    """Status, code and Discord's text in one line (no request content: that is the model's)."""
    text = " ".join(exc.text.split())
    return f"{exc.status} {exc.code}: {text[:300]}"


def edit_failure(exc: discord.HTTPException) -> Exception:
    """What LiveMessage should hear of a failed edit; ``exc`` itself when nothing fits."""
    if exc.status == 429:  # a 429 discord.py would not retry (no Via header)
        headers = exc.response.headers if exc.response is not None else None
        return RateLimited(retry_after_of(headers))
    if exc.status in PAYLOAD_REFUSED:
        return EditRejected(describe(exc))
    return exc


def token_expired(exc: discord.HTTPException) -> bool:
    """An interaction's webhook token is dead (15 minutes after the interaction)."""
    return exc.status == 401 and exc.code == 50027


def through_bot_token(message: discord.PartialMessage) -> discord.PartialMessage:
    """The same message, edited through the channel route with the bot token."""
    channel: Any = message.channel  # every channel an interaction or a mention happens in
    partial: discord.PartialMessage = channel.get_partial_message(message.id)
    return partial


async def send_post(target: Sendable, content: str, files: Sequence[FileSpec]) -> None:
    await target.send(
        content=content,
        files=to_files(files),
        allowed_mentions=NO_MENTIONS,
        suppress_embeds=True,  # URLs from tools are shown, never previewed
    )


async def suppress_embeds(message: discord.Message) -> None:
    """Set SUPPRESS_EMBEDS on a message created without it (an interaction's response, whose
    webhook routes discord.py gives no flags): one bot-token edit of the flags alone. The
    flag then holds through every later edit of the content."""
    if message.flags.suppress_embeds:
        return
    try:
        await discord.Message.edit(message, suppress=True)  # the channel route, not the webhook's
    except discord.HTTPException as exc:  # e.g. a user-installed app outside its guilds
        log.warning("could not suppress embeds on message %s: %s", message.id, describe(exc))


class DiscordSurface:
    """``adapters.live.Surface`` over one placeholder: a channel message or an interaction's."""

    def __init__(
        self,
        message: discord.Message,
        *,
        watch: RateLimitWatch,
        channel_key: str | None = None,
        controls: Callable[[PendingButtons | None], discord.ui.View] | None = None,
    ) -> None:
        self.message: discord.PartialMessage = message  # a Message is a PartialMessage
        self._watch = watch
        self._controls = controls
        """Builds the message's buttons: Stop, and the decision buttons while one is due."""
        self._shown: PendingButtons | None = None
        self._channel_key = channel_key or str(message.channel.id)
        self._on_bot_token = False
        """Set once an interaction's token died and edits went through the channel route."""

    @property
    def channel_key(self) -> str:
        return self._channel_key

    async def edit(self, payload: DiscordPayload) -> None:
        kwargs: dict[str, Any] = {"content": payload.content, "allowed_mentions": NO_MENTIONS}
        if payload.stop_button == "remove":
            kwargs["view"] = None
        elif self._controls is not None and payload.approval != self._shown:
            kwargs["view"] = self._controls(payload.approval)
            self._shown = payload.approval
        with self._watch.scope(self._channel_key):
            try:
                await self._edit(**kwargs)
            except discord.RateLimited as exc:
                raise RateLimited(exc.retry_after) from exc
            except discord.HTTPException as exc:
                failure = edit_failure(exc)
                if failure is exc:
                    raise
                raise failure from exc

    async def _edit(self, **kwargs: Any) -> None:
        if type(self.message) is discord.Message:
            # discord.py's Message.edit sends the flags with suppress_embeds=False unless told
            # otherwise, which would make every tool URL unfurl again after the first edit.
            # (An interaction's message and a PartialMessage send no flags: theirs hold.)
            kwargs["suppress"] = True
        try:
            await self.message.edit(**kwargs)
        except discord.HTTPException as exc:
            if not token_expired(exc) or self._on_bot_token:
                raise
            log.info(
                "the interaction token of message %s expired; editing it with the bot token",
                self.message.id,
            )
            self.message = through_bot_token(self.message)
            self._on_bot_token = True
            await self.message.edit(**kwargs)

    async def post_trace(self, trace: Trace, posts: Sequence[DiscordPayload]) -> None:
        target = await self._trace_target(thread_name(trace.question))
        if target is None:
            await self._attach_instead(trace)
            return
        for number, post in enumerate(posts, 1):
            try:
                await send_post(target, post.content, post.files)
            except discord.HTTPException as exc:
                if exc.status not in PAYLOAD_REFUSED:
                    raise
                log.warning(
                    "Discord refused post %d of %d of the trace of run %s (%s); posting the rest",
                    number,
                    len(posts),
                    trace.id,
                    describe(exc),
                )
                await self._note_refused(target, post, trace)

    async def _note_refused(self, target: Sendable, post: DiscordPayload, trace: Trace) -> None:
        """A visible gap instead of a silent one; the post's files still go if they can."""
        for files in (post.files, ()) if post.files else ((),):
            try:
                await send_post(target, REFUSED_POST_NOTE, files)
                return
            except discord.HTTPException as exc:
                if exc.status not in PAYLOAD_REFUSED:
                    raise
                log.warning("Discord refused the note for run %s too (%s)", trace.id, describe(exc))

    async def _trace_target(self, name: str) -> Sendable | None:
        """The thread under the message; the thread or DM it is already in; None if refused."""
        channel = self.message.channel
        if isinstance(channel, discord.Thread) or self.message.guild is None:
            return channel
        try:
            return await self.message.create_thread(
                name=name, auto_archive_duration=THREAD_ARCHIVE_MINUTES
            )
        except discord.Forbidden:
            log.warning("no permission to open a thread in channel %s", channel.id)
            return None
        except discord.HTTPException as exc:
            if exc.status not in PAYLOAD_REFUSED:
                raise
            log.warning("Discord refused a thread in channel %s (%s)", channel.id, describe(exc))
            return None

    async def _attach_instead(self, trace: Trace) -> None:
        files = [
            FileSpec(f"trace-{trace.id}.md", trace.to_markdown().encode()),
            FileSpec(f"trace-{trace.id}.json", trace.to_json(indent=2).encode()),
        ]
        await self.message.channel.send(
            content="-# I can't open threads here, so the trace is attached.",
            files=to_files(files),
            reference=self.message.to_reference(fail_if_not_exists=False),
            allowed_mentions=NO_MENTIONS,
            suppress_embeds=True,
        )
