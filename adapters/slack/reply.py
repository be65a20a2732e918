"""An answer on Slack (``SlackReply``): natively streamed into its thread where Slack allows
it, else a root message kept current with chat.update; and ``where_of``, where a question
was asked as the dispatcher reads it. What a reply needs of its bot is ``Bot`` (the
``adapters.slack.bot.SlackBot`` that makes it), so the two do not import each other."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

from adapters.dispatch.intents import PlaceKind, Where
from adapters.live import LiveMessage, LiveStats, RunView, Verbosity
from adapters.slack.payloads import Question
from adapters.slack.render import SlackRenderer
from adapters.slack.streaming import StreamPayload, StreamRenderer, StreamSurface, StreamUnsupported
from adapters.slack.surface import NotInChannel, SlackSurface, post_root

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient

    from adapters.dispatch.dispatcher import Dispatcher
    from adapters.dispatch.handlers.ask import Follower
    from adapters.pacing import EditPacer
    from adapters.slack.settings import SlackSettings
    from adapters.slack.streaming import StreamPacers
    from core.agent import Agent, Run
    from core.approval import ApprovalBroker
    from core.events import Event

log = logging.getLogger(__name__)

INVITE = (
    "I can't post in this channel because I'm not a member of it. "
    "Invite me with `/invite @reactbot`, then ask again."
)


def where_of(q: Question) -> Where:
    """Where the question was asked, as ``adapters.dispatch.conversation`` reads it."""
    kind: PlaceKind = "assistant" if q.assistant else "dm" if q.is_dm else "channel"
    if kind == "channel" and q.thread_ts:
        kind = "thread"
    return Where("slack", kind, q.channel, space=q.team, thread=q.thread_ts, name=q.channel_name)


class Bot(Protocol):
    """What a reply needs of the bot it answers for."""

    client: AsyncWebClient
    dispatcher: Dispatcher[Question]
    settings: SlackSettings
    agent: Agent
    broker: ApprovalBroker | None
    pacer: EditPacer
    stream_pacers: StreamPacers
    trace_link: Callable[[str], str | None] | None

    def stream_thread(self, question: Question) -> str | None: ...

    def with_thread_status(
        self, question: Question, events: AsyncIterator[Event]
    ) -> AsyncGenerator[Event, None]: ...

    async def set_thread_status(
        self, question: Question, status: str, *, title: bool = False
    ) -> None: ...

    async def tell(self, question: Question, text: str) -> None: ...

    async def note_in_thread(self, channel: str, thread_ts: str, text: str) -> None: ...


class SlackReply:
    """An answer on Slack: natively streamed into its thread where Slack allows it (DMs and
    assistant threads under ``auto``), else a root message kept current with chat.update."""

    def __init__(self, bot: Bot, question: Question) -> None:
        self.bot, self.question = bot, question
        self.root = ""
        """The root message (chat.update), or the thread the stream replies in."""
        self.stream: StreamSurface | None = None

    async def open(self, verbosity: Verbosity) -> str | None:
        q, bot = self.question, self.bot
        if q.assistant:
            await bot.set_thread_status(q, "is thinking…", title=True)
        thread = bot.stream_thread(q)
        if thread is None or not await self._stream_into(thread, verbosity):
            placeholder = SlackRenderer().live(RunView(question=q.text, asker=q.user))
            try:
                self.root = await post_root(
                    bot.client, channel=q.channel, thread_ts=q.thread_ts, message=placeholder
                )
            except NotInChannel:
                await bot.tell(q, INVITE)
                return None
        return bot.dispatcher.conversation(where_of(q), root=self.root)

    async def _stream_into(self, thread: str, verbosity: Verbosity) -> bool:
        """Start Slack's agent stream in ``thread``; False when Slack will not stream here
        (the answer goes by chat.update instead)."""
        q, bot = self.question, self.bot
        stream = StreamSurface(
            bot.client,
            bot.stream_pacers,
            channel=q.channel,
            thread_ts=thread,
            recipient_user_id=q.user,
            recipient_team_id=q.team,
        )
        try:
            await stream.start(RunView(question=q.text, asker=q.user, verbosity=verbosity))
        except StreamUnsupported as exc:
            log.info("streaming is not available in %s (%s): using chat.update", q.channel, exc)
            return False
        self.stream, self.root = stream, thread
        return True

    def reading(self) -> AbstractAsyncContextManager[object]:
        return contextlib.nullcontext()

    def where(self) -> dict[str, str]:
        """The root message (chat.update), or the thread a stream replies in."""
        q = self.question
        kind = "stream" if self.stream is not None else "root"
        return {"channel": q.channel, "ts": self.root, "thread_ts": q.thread_ts or "", "kind": kind}

    async def show(self, run: Run, view: RunView) -> Follower:
        q, bot = self.question, self.bot
        tick = max(1.0, bot.settings.update_interval)
        if self.stream is not None:
            streamed: LiveMessage[StreamPayload] = LiveMessage(
                self.stream,
                StreamRenderer(run.trace.id, trace_link=bot.trace_link),
                bot.stream_pacers.append,
                view=view,
                tick=tick,
            )
            return _StatusShown(streamed, bot, q) if q.assistant else streamed
        surface = SlackSurface(bot.client, channel=q.channel, ts=self.root, thread_ts=q.thread_ts)
        renderer = SlackRenderer(
            run_id=run.trace.id,
            approvals=bot.broker is not None,
            approval_timeout=bot.agent.settings.approval_timeout,
            trace_link=bot.trace_link,
        )
        return LiveMessage(surface, renderer, bot.pacer, view=view, tick=tick)

    async def note(self, text: str) -> None:
        await self.bot.note_in_thread(
            self.question.channel, self.question.thread_ts or self.root, text
        )

    async def ended(self, run: Run) -> None:
        if self.stream is not None and self.question.assistant:
            await self.bot.set_thread_status(self.question, "")


class _StatusShown:
    """A stream that also shows the run's phase as its assistant thread's status."""

    def __init__(self, stream: LiveMessage[StreamPayload], bot: Bot, question: Question) -> None:
        self.stream, self.bot, self.question = stream, bot, question

    @property
    def stats(self) -> LiveStats:
        return self.stream.stats

    async def follow(self, events: AsyncIterator[Event]) -> RunView:
        shown = self.bot.with_thread_status(self.question, events)
        async with contextlib.aclosing(shown) as watched:
            return await self.stream.follow(watched)
