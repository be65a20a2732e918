"""The live-message Surface on discord.py messages, and how our pacer learns about 429s.

discord.py retries a 429 itself: it sleeps ``retry_after`` and sends the same request again,
raising ``discord.RateLimited`` only when the wait exceeds ``max_ratelimit_timeout`` (30 s at
the least), and waits by itself whenever a bucket's headers say it is spent. Our pacer must
know what discord.py knows, so ``RateLimitWatch`` observes every response through aiohttp
tracing (``Client(http_trace=...)``): each bucket's headers correct the pacer's count for the
channel, and a 429 empties the channel for its ``retry_after``. The edit in flight is still
delivered by discord.py's retry; the next one waits for the channel's allowance. Long waits surface as ``adapters.live.RateLimited``
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

from adapters.discord.payload import DiscordPayload, FileSpec, PendingButtons
from adapters.discord.render import thread_name
from adapters.live import EditRejected, RateLimited
from adapters.pacing import EditPacer
from core.trace import Trace

log = logging.getLogger(__name__)

NO_MENTIONS = discord.AllowedMentions.none()
THREAD_ARCHIVE_MINUTES: Literal[60, 1440, 4320, 10080] = 1440

Sendable = discord.abc.Messageable


class RateLimitWatch:
    """Hears every response the bot's HTTP session gets and tells the pacer about its channel's
    bucket: a 429's wait, or the ``X-RateLimit-*`` figures of any other answer.

    A response is about a channel when it answers one of our edits there (the scope set around
    each edit) or a message write on a ``/channels/{id}/`` route; the pacer believes the latter
    only for the bucket the edits use (``X-RateLimit-Bucket``)."""

    def __init__(self, pacer: Callable[[], EditPacer | None]) -> None:
        self._pacer = pacer
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
        response = params.response
        if response.status == 429:
            self.hits += 1
        key = self._scope.get()
        scoped = key is not None
        if key is None:
            key = written_channel(params.method, params.url.path)
        pacer = self._pacer()
        if key is None or pacer is None:
            return
        headers = response.headers
        if response.status == 429:
            shared = headers.get("X-RateLimit-Global", "").lower() == "true"
            pacer.rate_limit_hit(key, retry_after_of(headers), shared=shared)
            return
        figures = bucket_figures(headers)
        if figures is not None:
            limit, remaining, reset_after = figures
            pacer.observe(
                key,
                limit=limit,
                remaining=remaining,
                reset_after=reset_after,
                bucket=headers.get("X-RateLimit-Bucket"),
                scoped=scoped,
            )


def written_channel(method: str, path: str) -> str | None:
    """The channel a message write (``POST``/``PATCH``/``DELETE /channels/{id}/...``) is in."""
    if method not in ("POST", "PATCH", "DELETE"):
        return None
    parts = path.split("/")
    with contextlib.suppress(ValueError, IndexError):
        channel = parts[parts.index("channels") + 1]
        return channel if channel.isdigit() else None
    return None


def bucket_figures(headers: Any) -> tuple[int, int, float] | None:
    """``(limit, remaining, reset_after)`` from a response's rate-limit headers, if it has them."""
    try:
        return (
            int(headers["X-RateLimit-Limit"]),
            int(headers["X-RateLimit-Remaining"]),
            float(headers["X-RateLimit-Reset-After"]),
        )
    except (KeyError, ValueError):
        return None


def retry_after_of(headers: Any) -> float:
    """Seconds to wait from a 429's headers (Discord sends both; either will do)."""
    for name in ("X-RateLimit-Reset-After", "Retry-After"):
        value = headers.get(name) if headers is not None else None
        if value is not None:
            with contextlib.suppress(ValueError):
                return max(0.0, float(value))
    return 1.0


class CardView(discord.ui.LayoutView):
    """A card's LayoutView. ``sets_flag`` off: an edit of a message that already has the
    Components V2 flag goes without any ``flags``, so the message keeps that flag and
    SUPPRESS_EMBEDS. (An edit's ``flags`` replace the message's editable ones, and on the
    routes that take no flags of ours, an interaction's webhook and a PartialMessage,
    discord.py would send IS_COMPONENTS_V2 alone: the tools' URLs would unfurl again.)"""

    def __init__(self, *, sets_flag: bool = True) -> None:
        super().__init__(timeout=None)
        self.sets_flag = sets_flag

    def has_components_v2(self) -> bool:
        return self.sets_flag and super().has_components_v2()


def release_view(view: discord.ui.LayoutView) -> None:
    """Unlinks a sent card from its items, so reference counting frees them all at once.

    discord.py's items point back at their view and container (``_view``, ``_parent``)
    while those list them: every card is a cycle of a dozen objects that only the garbage
    collector frees. A card is built for each live edit and each trace post, and one still
    in flight at a young collection reaches the oldest generation, collected rarely: at 80
    conversations (``bench/soak.py``) these cards were a third of what ended runs left
    there. Only for a card whose buttons are all dynamic items (``adapters.discord.buttons``),
    which discord.py's view store does not keep: nothing reads it once it is sent."""
    items = list(view.walk_children())
    view.clear_items()
    for item in items:
        item._view = None
        item._parent = None
        children = getattr(item, "_children", None)  # a Container's, an ActionRow's
        if isinstance(children, list):
            children.clear()


CardBuilder = Callable[[DiscordPayload, bool], CardView]
"""A payload's card with its buttons; the bool is ``CardView.sets_flag``."""


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


async def send_post(
    target: Sendable,
    content: str,
    files: Sequence[FileSpec],
    *,
    view: discord.ui.LayoutView | None = None,
) -> None:
    """A message in the thread: ``content``, or (``view``) a Components V2 card, which
    carries no content (Discord refuses both: 50035)."""
    if view is not None:
        await target.send(
            view=view,
            files=to_files(files),
            allowed_mentions=NO_MENTIONS,
            suppress_embeds=True,
        )
        return
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
        pacer: EditPacer | None = None,
        channel_key: str | None = None,
        controls: Callable[[PendingButtons | None], discord.ui.View] | None = None,
        votes: Callable[[], discord.ui.View] | None = None,
        cards: CardBuilder | None = None,
        compact_trace: Callable[[Trace], DiscordPayload] | None = None,
    ) -> None:
        self.message: discord.PartialMessage = message  # a Message is a PartialMessage
        self._compact_trace = compact_trace
        """An answer in a thread the bot opened: its trace as one post (the attached files
        and the page link) instead of a post per step, so the thread stays a conversation."""
        self._watch = watch
        self._pacer = pacer
        """Paces the surface's other writes in the channel (the thread, its posts there)."""
        self._controls = controls
        """Builds the message's buttons: Stop, and the decision buttons while one is due."""
        self._votes = votes
        """Builds 👍 / 👎 for a finished answer (the text layout; a card has its own)."""
        self._cards = cards
        """Builds a payload's card (the ``components`` layout) with its buttons."""
        self._shown: PendingButtons | None = None
        self._channel_key = channel_key or str(message.channel.id)
        self._on_bot_token = False
        """Set once an interaction's token died and edits went through the channel route."""
        self._webhook = isinstance(message, discord.InteractionMessage)
        self._is_card = bool(getattr(message, "flags", None) and message.flags.components_v2)
        """The message has the Components V2 flag (it never loses it)."""

    @property
    def channel_key(self) -> str:
        """The bucket the edits count against: the channel's message writes, or, while an
        interaction's token edits its message, that token's own webhook bucket."""
        if self._webhook and not self._on_bot_token:
            return f"{self._channel_key}:interaction:{self.message.id}"
        return self._channel_key

    async def edit(self, payload: DiscordPayload) -> None:
        kwargs: dict[str, Any] = {"content": payload.content, "allowed_mentions": NO_MENTIONS}
        if payload.card is not None:
            # The message is the card, buttons and all; it never carries content.
            view = self._card(payload, sets_flag=not self._is_card)
            kwargs = {"view": view, "allowed_mentions": NO_MENTIONS}
        elif payload.stop_button == "remove":
            kwargs["view"] = self._votes() if payload.votes and self._votes is not None else None
        elif self._controls is not None and payload.approval != self._shown:
            kwargs["view"] = self._controls(payload.approval)
        if payload.files:  # the pictures a tool returned, attached to the final answer
            kwargs["attachments"] = to_files(payload.files)
        try:
            try:
                await self._edit(**kwargs)
            finally:
                if isinstance(kwargs.get("view"), CardView):
                    release_view(kwargs["view"])
            if "view" in kwargs:  # only once Discord has them: a failed edit sends them again
                self._shown = payload.approval
            self._is_card = self._is_card or payload.card is not None
        except discord.RateLimited as exc:
            raise RateLimited(exc.retry_after) from exc
        except discord.HTTPException as exc:
            failure = edit_failure(exc)
            if failure is exc:
                raise
            raise failure from exc

    def _card(self, payload: DiscordPayload, *, sets_flag: bool = True) -> CardView:
        if self._cards is None:
            raise EditRejected("a card to show, but no card builder")
        return self._cards(payload, sets_flag)

    async def _edit(self, **kwargs: Any) -> None:
        if type(self.message) is discord.Message:
            # discord.py's Message.edit sends the flags with suppress_embeds=False unless told
            # otherwise, which would make every tool URL unfurl again after the first edit.
            # (An interaction's message and a PartialMessage send no flags: theirs hold.)
            kwargs["suppress"] = True
        try:
            with self._watch.scope(self.channel_key):
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
            if self._pacer is not None:  # a write in the channel's bucket, not the token's
                await self._pacer.charge(self.channel_key)
            with self._watch.scope(self.channel_key):
                await self.message.edit(**kwargs)

    def _in_channel(self, target: object = None) -> contextlib.AbstractAsyncContextManager[None]:
        """A write counted in the live message's channel bucket (``target`` None: the channel
        itself) waits for the pacer like an edit that leaves the finals their write; writes
        elsewhere (a new thread) have their own bucket."""
        channel_id = getattr(target, "id", None) if target is not None else self.message.channel.id
        if self._pacer is None or channel_id != self.message.channel.id:
            return contextlib.nullcontext()
        return self._pacer.slot(str(channel_id), priority="first")

    async def post_trace(self, trace: Trace, posts: Sequence[DiscordPayload]) -> None:
        if self._compact_trace is not None:
            posts = [self._compact_trace(trace)]
        target = await self._trace_target(thread_name(trace.question))
        if target is None:
            async with self._in_channel():
                await self._attach_instead(trace)
            return
        for number, post in enumerate(posts, 1):
            try:
                async with self._in_channel(target):
                    view = self._card(post) if post.card is not None else None
                    try:
                        await send_post(target, post.content, post.files, view=view)
                    finally:
                        if view is not None:
                            release_view(view)
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
            async with self._in_channel():
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
