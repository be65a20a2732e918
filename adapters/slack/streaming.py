"""Slack's agent streaming: one run as a streamed reply (``chat.startStream``, then
``chat.appendStream`` as it goes, ``chat.stopStream`` at the end), rendered by
``adapters.slack.stream_render``: a plan of task cards, one per step, updated live, then the
answer streaming in, and at stop the totals and 👍 / 👎.

It is a surface of ``adapters.live.LiveMessage`` like every other: LiveMessage owns the
pacing loop (the dirty flag, the live-edit grace, first/live/final priorities, the final
attempts and the trace thread); ``StreamRenderer`` turns the run's view into the state the
reply should show, and ``StreamSurface`` *appends* to the reply what that state adds to what
it already sent (a ``chat.update`` surface replaces its message instead).

Paced by each method's rate tier, per workspace (``StreamPacers``): ``chat.appendStream``
Tier 4 (100+ per minute) with the channel's live interval between appends,
``chat.startStream`` and ``chat.stopStream`` Tier 2 (20+ per minute). Appends coalesce: each
one carries every task that changed and the answer text that arrived since the last.

What Slack answers, and what happens::

    start refused (any error: a workspace or
    message kind without streaming, a tier spent) -> StreamUnsupported: the bot falls back
                                                      to chat.update (adapters.slack.surface)
    "message_not_in_streaming_state" (Slack closed
    a long stream)                                 -> a new stream in the same thread goes on
    429 / "ratelimited"                            -> the tier's pacer waits Retry-After; the
                                                      next append carries the latest state
    5xx, transient errors, a dropped connection    -> tried again after a short back-off
    the chunks refused ("invalid_chunks", ...)     -> logged and skipped (a bug of ours)
    the message gone, the token refused            -> the stream ends; the final state is
                                                      posted as a new message in the thread
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.live import EditDeferred, EditRejected, RateLimited, RunView
from adapters.pacing import Budget, EditPacer, per_minute
from adapters.slack.blocks import SlackMessage
from adapters.slack.render import SlackRenderer
from adapters.slack.stream_render import (
    MARKDOWN_LIMIT,
    Chunk,
    ending_markdown,
    fitting_end,
    plan_title,
    safe_markdown,
    stop_blocks,
    task_chunks,
)
from adapters.slack.surface import (
    _AUTH,
    _GONE,
    _TRANSIENT,
    TRANSIENT_BACKOFF,
    SlackSurface,
    api_error,
    is_rate_limited,
    post_root,
    retry_after,
)
from core.errors import ReactbotError
from core.trace import Trace

log = logging.getLogger(__name__)

START, APPEND, STOP = "chat.startStream", "chat.appendStream", "chat.stopStream"
TIERS: Mapping[str, int] = {START: 20, APPEND: 100, STOP: 20}
"""Calls per minute per workspace: appendStream Tier 4 ("100+ per minute", its reference
page), stopStream Tier 2 ("20+"); startStream taken as Tier 2 like stopStream."""
NOT_STREAMING = "message_not_in_streaming_state"
FINAL_ATTEMPTS = 8
CONTINUED = "_(continued)_\n\n"
MIN_PIECE = 200
"""The smallest answer piece tried when Slack keeps closing new streams."""


class StreamUnsupported(ReactbotError):
    """chat.startStream refused: answer with chat.update instead."""


@dataclass(slots=True)
class StreamPacers:
    """One pacer per streaming method, each within its tier (shared by every replica when the
    budgets come from Redis)."""

    start: EditPacer
    append: EditPacer
    stop: EditPacer

    @classmethod
    def for_workspace(
        cls, live_interval: float, shared: Mapping[str, Budget] | None = None
    ) -> StreamPacers:
        def budget(method: str) -> Budget:
            return per_minute(TIERS[method], (shared or {}).get(method))

        return cls(
            start=EditPacer(0.0, shared=budget(START)),
            append=EditPacer(live_interval, shared=budget(APPEND)),
            stop=EditPacer(0.0, shared=budget(STOP)),
        )


@dataclass(frozen=True, slots=True)
class StreamState:
    """What the streamed reply should show now: LiveMessage's payload for this surface."""

    tasks: tuple[Chunk, ...]
    """Every task card as it should read (``task_chunks``)."""
    answer: str
    """The answer so far, as the model wrote it (made safe when sent)."""
    final: bool = False
    ending: str = ""
    """What a failed or stopped run adds at the end (already safe)."""
    blocks: tuple[Chunk, ...] = ()
    """Below the finished reply: the totals and 👍 / 👎 (``stop_blocks``)."""
    fallback: SlackMessage | None = None
    """The final state as a message of its own, for a stream that died."""


StreamPayload = StreamState | SlackMessage
"""A stream surface is edited with states; its trace thread is posted as messages."""


class StreamRenderer:
    """``adapters.live.Renderer`` for a streamed reply: the view as a ``StreamState``."""

    def __init__(
        self, run_id: str = "", *, trace_link: Callable[[str], str | None] | None = None
    ) -> None:
        self.run_id = run_id
        self.trace_link = trace_link

    def live(self, view: RunView) -> StreamState:
        return StreamState(tuple(task_chunks(view)), view.answer)

    def final(self, view: RunView) -> StreamState:
        return StreamState(
            tuple(task_chunks(view)),
            view.answer,
            final=True,
            ending=ending_markdown(view),
            blocks=tuple(stop_blocks(view, self.run_id)),
            fallback=SlackRenderer(run_id=self.run_id).final(view),
        )

    def compact(self, view: RunView) -> StreamState:
        return replace(self.final(view), blocks=())

    def plain(self, text: str) -> StreamState:
        fallback = SlackRenderer(run_id=self.run_id).plain(text)
        shown = text.strip()
        ending = safe_markdown(shown[: fitting_end(shown, 0, MARKDOWN_LIMIT)])
        return StreamState((), "", final=True, ending=ending, fallback=fallback)

    def trace_posts(
        self, trace: Trace, *, whole_answer: bool = False, steps: bool = True
    ) -> list[StreamPayload]:
        """The thread under the reply; none at ``answer`` verbosity (the stream carried the
        whole answer, so it never needs repeating there)."""
        if not steps:
            return []
        renderer = SlackRenderer(run_id=trace.id, trace_link=self.trace_link)
        return list(renderer.trace_posts(trace, whole_answer=False))


Failure = Literal["rate_limited", "transient", "dead", "refused"]


class StreamSurface:
    """``adapters.live.Surface`` that appends: each edit sends what the new state adds to what
    the reply already shows (the tasks that changed, then the answer text not sent yet), and
    the final edit ends the stream (or, once it died, posts the final state anew)."""

    def __init__(
        self,
        client: AsyncWebClient,
        pacers: StreamPacers,
        *,
        channel: str,
        thread_ts: str,
        recipient_user_id: str,
        recipient_team_id: str,
    ) -> None:
        self.client = client
        self.pacers = pacers
        self.channel = channel
        self.thread_ts = thread_ts
        self.recipient_user_id = recipient_user_id or None
        self.recipient_team_id = recipient_team_id or None
        self.ts: str | None = None
        """The streamed message (after a continuation, the newest one)."""
        self.messages: list[str] = []
        self.extra_requests = 0
        """Requests beyond one per edit (LiveMessage charges them to the channel's pace)."""
        self._sent_tasks: dict[str, Chunk] = {}
        self._answer_base = ""
        """The answer text a prefix of which was streamed (it may start over)."""
        self._answer_sent = 0
        self._separator = ""
        self._ending_sent = False
        self._dead = False
        self._fresh = False
        """The stream was just continued in a new message: no answer text taken by it yet."""
        self._piece_limit = MARKDOWN_LIMIT

    @property
    def channel_key(self) -> str:
        return self.channel

    # ---- start ----------------------------------------------------------------------------
    async def start(self, view: RunView) -> None:
        """Open the stream with the plan's title; StreamUnsupported if Slack will not."""
        async with self.pacers.start.slot(self.channel, priority="first"):
            try:
                plan = [{"type": "plan_update", "title": plan_title(view)}]
                shown = view.verbosity != "answer"  # there, only the answer appears
                self.ts = await self._start_stream(**({"chunks": plan} if shown else {}))
            except SlackApiError as exc:
                if is_rate_limited(exc):
                    self.pacers.start.rate_limit_hit(self.channel, retry_after(exc), shared=True)
                raise StreamUnsupported(f"chat.startStream: {api_error(exc) or exc}") from exc
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise StreamUnsupported(f"chat.startStream failed: {exc!r}") from exc

    async def _start_stream(self, **content: Any) -> str:
        response = await self.client.chat_startStream(
            channel=self.channel,
            thread_ts=self.thread_ts,
            task_display_mode="plan",
            recipient_user_id=self.recipient_user_id,
            recipient_team_id=self.recipient_team_id,
            **content,
        )
        ts = str(response["ts"])
        self.messages.append(ts)
        return ts

    # ---- edits ----------------------------------------------------------------------------
    async def edit(self, payload: StreamPayload) -> None:
        if not isinstance(payload, StreamState):
            raise EditRejected("a streamed reply is edited with stream states only")
        if payload.final:
            await self._finish(payload)
        else:
            await self._push(payload)

    async def _push(self, state: StreamState) -> int:
        """Every task that changed, then the rest of the answer in pieces Slack takes; how
        many appends that took (each beyond the edit's first is an extra request)."""
        requests = 0
        while not self._dead:
            content, advance = self._next(state)
            if content is None:
                break
            if requests:
                self.extra_requests += 1
            requests += 1
            if await self._append(content):
                advance()
        return requests

    def _next(self, state: StreamState) -> tuple[dict[str, Any] | None, Callable[[], None]]:
        """The next append's content, and what to mark sent once Slack took (or refused) it."""
        tasks = self._changed_tasks(state.tasks)
        if tasks:

            def tasks_sent() -> None:
                self._sent_tasks.update((c["id"], c) for c in tasks)

            return {"chunks": tasks}, tasks_sent
        rest = self._answer_rest(state.answer)
        if not rest:
            return None, lambda: None
        end = fitting_end(rest, 0, self._piece_limit - len(self._separator))

        def piece_sent() -> None:
            self._answer_sent += end
            self._separator = ""
            self._fresh = False

        return {"markdown_text": self._separator + safe_markdown(rest[:end])}, piece_sent

    def _changed_tasks(self, current: tuple[Chunk, ...]) -> list[Chunk]:
        """The cards to send: each that changed, and each shown earlier that the run has
        since moved past (a step's thinking that became the answer) as complete."""
        ids = {c["id"] for c in current}
        passed = [
            {**chunk, "status": "complete"}
            for key, chunk in self._sent_tasks.items()
            if key not in ids and chunk["status"] in ("pending", "in_progress")
        ]
        return passed + [c for c in current if self._sent_tasks.get(c["id"]) != c]

    def _answer_rest(self, answer: str) -> str:
        if not answer.startswith(self._answer_base[: self._answer_sent]):
            # The answer started over (a format retry, the answer model): what was streamed
            # stays; the new text follows it, set apart.
            self._separator = "\n\n" if self._answer_sent else ""
            self._answer_sent = 0
        self._answer_base = answer
        return answer[self._answer_sent :]

    async def _append(self, content: dict[str, Any]) -> bool:
        """One ``chat.appendStream``; True when its content is done with (sent, or refused
        and skipped), False when it is to be sent again (the stream went on in a new
        message). Rate limits and transient faults are raised for LiveMessage to pace."""
        try:
            await self.client.chat_appendStream(channel=self.channel, ts=self.ts or "", **content)
        except SlackApiError as exc:
            if api_error(exc) == NOT_STREAMING:
                await self._continue()
                return False
            return self._failed(APPEND, exc)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise EditDeferred(TRANSIENT_BACKOFF, f"chat.appendStream failed: {exc!r}") from exc
        return True

    def _failed(self, method: str, exc: SlackApiError) -> bool:
        match self._kind(exc):
            case "rate_limited":
                raise RateLimited(retry_after(exc), shared=True) from exc
            case "transient":
                raise EditDeferred(TRANSIENT_BACKOFF, f"{method}: {api_error(exc)}") from exc
            case "dead":
                self._gone(method, exc)
            case "refused":
                log.error("%s refused what reactbot sent (%s): skipped", method, exc)
        return True

    def _kind(self, exc: SlackApiError) -> Failure:
        error = api_error(exc)
        if is_rate_limited(exc):
            return "rate_limited"
        if error in _TRANSIENT or getattr(exc.response, "status_code", 200) >= 500:
            return "transient"
        if error in _GONE or error in _AUTH:
            return "dead"
        return "refused"

    def _gone(self, method: str, exc: SlackApiError) -> None:
        error = api_error(exc)
        level = logging.WARNING if error in _GONE else logging.ERROR
        log.log(level, "%s of %s in %s failed: %s", method, self.ts, self.channel, error)
        self._dead = True

    async def _continue(self) -> None:
        """Slack closed the stream: the reply goes on in a new message of the same thread
        (the caller sends what was refused again). Refused on a new message too, the pieces
        get smaller; at the smallest, the stream is given up (the final state is posted)."""
        if self._fresh:
            self._piece_limit //= 2
            if self._piece_limit < MIN_PIECE:
                log.warning("Slack keeps closing the stream in %s; giving up", self.channel)
                self._dead = True
                return
        log.info("the stream %s in %s was closed by Slack; continuing", self.ts, self.channel)
        self._sent_tasks.clear()  # the new message shows the tasks again as they change
        try:
            self.ts = await self._start_stream(markdown_text=CONTINUED)
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not continue the stream in %s: %r", self.channel, exc)
            self._dead = True
            return
        self._fresh = True

    # ---- the end --------------------------------------------------------------------------
    async def _finish(self, state: StreamState) -> None:
        """Every task in its final status, the rest of the answer, how it ended, then stop
        with the totals and the feedback buttons; a dead stream's final state is posted."""
        appended = await self._push(state)
        if state.ending and not self._dead and not self._ending_sent:
            if appended:
                self.extra_requests += 1
            self._ending_sent = await self._append({"markdown_text": state.ending})
        if not self._dead and await self._stop(list(state.blocks)):
            return
        await self._post_final(state.fallback)

    async def _stop(self, blocks: list[Chunk]) -> bool:
        for _ in range(FINAL_ATTEMPTS):
            async with self.pacers.stop.slot(self.channel, priority="final"):
                try:
                    await self.client.chat_stopStream(
                        channel=self.channel, ts=self.ts or "", blocks=blocks
                    )
                    return True
                except SlackApiError as exc:
                    if api_error(exc) == NOT_STREAMING:  # closed by Slack meanwhile
                        return await self._stop_in_new_message(blocks)
                    kind = self._kind(exc)
                    if kind == "rate_limited":
                        self.pacers.stop.rate_limit_hit(self.channel, retry_after(exc), shared=True)
                    elif kind == "transient":
                        self.pacers.stop.postpone(self.channel, TRANSIENT_BACKOFF)
                    elif kind == "dead":
                        self._gone(STOP, exc)
                        return False
                    else:
                        log.error("chat.stopStream refused its blocks (%s): stopping without", exc)
                        blocks = []
                except (aiohttp.ClientError, TimeoutError) as exc:
                    log.warning("chat.stopStream in %s failed: %r", self.channel, exc)
                    self.pacers.stop.postpone(self.channel, TRANSIENT_BACKOFF)
        log.error("gave up stopping the stream %s in %s", self.ts, self.channel)
        return False

    async def _stop_in_new_message(self, blocks: list[Chunk]) -> bool:
        try:
            self.ts = await self._start_stream(markdown_text=CONTINUED.strip())
            await self.client.chat_stopStream(channel=self.channel, ts=self.ts, blocks=blocks)
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not end the reply in %s with its buttons: %r", self.channel, exc)
            return False
        return True

    async def _post_final(self, message: SlackMessage | None) -> None:
        """The stream died: the final state as a message of its own, so nothing is lost."""
        if message is None:
            return
        try:
            await post_root(
                self.client, channel=self.channel, thread_ts=self.thread_ts, message=message
            )
        except Exception:  # the log is all that is left
            log.exception("could not post the final state in %s", self.channel)

    async def post_trace(self, trace: Trace, posts: Sequence[StreamPayload]) -> None:
        """The trace thread: the thread the reply is in."""
        messages = [p for p in posts if isinstance(p, SlackMessage)]
        surface = SlackSurface(
            self.client,
            channel=self.channel,
            ts=self.ts or self.thread_ts,
            thread_ts=self.thread_ts,
        )
        await surface.post_trace(trace, messages)
