"""Slack's agent streaming: one run as a streamed reply (``chat.startStream``, then
``chat.appendStream`` as it goes, ``chat.stopStream`` at the end), rendered by
``adapters.slack.stream_render``: a plan of task cards, one per step, updated live, then the
answer streaming in, and at stop the totals and 👍 / 👎.

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

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.live import LiveStats, RunView
from adapters.pacing import Budget, EditPacer, Priority, per_minute
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
from core.events import AnswerDelta, Event, ThoughtDelta

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


Outcome = Literal["sent", "retry", "dropped", "dead"]


class NativeStream:
    """Streams one run into one reply of a thread."""

    LIVE_GRACE = 5.0

    def __init__(
        self,
        client: AsyncWebClient,
        pacers: StreamPacers,
        *,
        channel: str,
        thread_ts: str,
        recipient_user_id: str,
        recipient_team_id: str,
        view: RunView,
        run_id: str,
        tick: float = 1.0,
    ) -> None:
        self.client = client
        self.pacers = pacers
        self.channel = channel
        self.thread_ts = thread_ts
        self.recipient_user_id = recipient_user_id or None
        self.recipient_team_id = recipient_team_id or None
        self.view = view
        self.run_id = run_id
        self.tick = tick
        self.ts: str | None = None
        """The streamed message (after a continuation, the newest one)."""
        self.messages: list[str] = []
        self.stats = LiveStats()
        self._sent_tasks: dict[str, Chunk] = {}
        self._answer_base = ""
        """The answer text a prefix of which was streamed (it may start over)."""
        self._answer_sent = 0
        self._separator = ""
        self._dead = False
        self._fresh = False
        """The stream was just continued in a new message: no answer text taken by it yet."""
        self._piece_limit = MARKDOWN_LIMIT
        self._dirty = asyncio.Event()
        self._stopping = False
        self._pushing = False

    # ---- start ----------------------------------------------------------------------------
    async def start(self) -> None:
        """Open the stream with the plan's title; StreamUnsupported if Slack will not."""
        async with self.pacers.start.slot(self.channel, priority="first"):
            try:
                plan = [{"type": "plan_update", "title": plan_title(self.view)}]
                shown = self.view.verbosity != "answer"  # there, only the answer appears
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

    # ---- follow ---------------------------------------------------------------------------
    async def follow(self, events: AsyncIterator[Event]) -> RunView:
        """Stream the run's events until the final one; the reply ends in a final state."""
        with self.pacers.append.following():
            flusher = asyncio.get_running_loop().create_task(self._flush_loop())
            try:
                async for event in events:
                    if self.stats.first_text_at is None and isinstance(
                        event, ThoughtDelta | AnswerDelta
                    ):
                        self.stats.first_text_at = time.monotonic()
                    self.view.apply(event)
                    self._dirty.set()
                    if self.view.is_final:
                        break
            finally:
                await self._stop_flusher(flusher)
            if not self.view.is_final:
                self.view.phase, self.view.reason = "failed", "The run ended without a result."
            self.stats.final_at = time.monotonic()
            await self._finish()
        return self.view

    async def _stop_flusher(self, flusher: asyncio.Task[None]) -> None:
        self._stopping = True
        if self._pushing:  # an append already sent: let it land before the final ones
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(flusher), self.LIVE_GRACE)
        flusher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await flusher
            except Exception:
                log.exception("live streaming failed")

    async def _flush_loop(self) -> None:
        while not self._stopping and not self._dead:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.tick):
                    await self._dirty.wait()
            self._dirty.clear()
            if not self._pending():
                continue
            priority: Priority = "first" if self.stats.edits == 0 else "live"
            async with self.pacers.append.slot(self.channel, priority=priority):
                if self._stopping:
                    return
                self._pushing = True
                try:
                    await self._push()
                finally:
                    self._pushing = False

    def _changed_tasks(self) -> list[Chunk]:
        """The cards to send: each that changed, and each shown earlier that the run has
        since moved past (a step's thinking that became the answer) as complete."""
        current = task_chunks(self.view)
        ids = {c["id"] for c in current}
        passed = [
            {**chunk, "status": "complete"}
            for key, chunk in self._sent_tasks.items()
            if key not in ids and chunk["status"] in ("pending", "in_progress")
        ]
        return passed + [c for c in current if self._sent_tasks.get(c["id"]) != c]

    def _answer_rest(self) -> str:
        answer = self.view.answer
        if not answer.startswith(self._answer_base[: self._answer_sent]):
            # The answer started over (a format retry, the answer model): what was streamed
            # stays; the new text follows it, set apart.
            self._separator = "\n\n" if self._answer_sent else ""
            self._answer_sent = 0
        self._answer_base = answer
        return answer[self._answer_sent :]

    def _pending(self) -> bool:
        return bool(self._changed_tasks()) or bool(self._answer_rest())

    async def _push(self) -> Outcome:
        """One append: the tasks that changed, else the next piece of the answer."""
        tasks = self._changed_tasks()
        if tasks:
            outcome = await self._append(chunks=tasks)
            if outcome in ("sent", "dropped"):
                self._sent_tasks.update((c["id"], c) for c in tasks)
            return outcome
        rest = self._answer_rest()
        if not rest:
            return "sent"
        room = self._piece_limit - len(self._separator)
        end = fitting_end(rest, 0, room)
        outcome = await self._append(markdown_text=self._separator + safe_markdown(rest[:end]))
        if outcome in ("sent", "dropped"):
            self._answer_sent += end
            self._separator = ""
            self._fresh = False
        return outcome

    async def _append(self, **content: Any) -> Outcome:
        if self._dead or self.ts is None:
            return "dead"
        try:
            await self.client.chat_appendStream(channel=self.channel, ts=self.ts, **content)
        except SlackApiError as exc:
            error = api_error(exc)
            if error == NOT_STREAMING:
                return await self._continue()
            return self._failed(APPEND, self.pacers.append, exc)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("chat.appendStream in %s failed: %r", self.channel, exc)
            self.pacers.append.postpone(self.channel, TRANSIENT_BACKOFF)
            return "retry"
        self._sent()
        return "sent"

    def _sent(self) -> None:
        now = time.monotonic()
        self.stats.edits += 1
        self.stats.edit_times.append(now)
        if self.stats.first_visible_at is None and self.stats.first_text_at is not None:
            self.stats.first_visible_at = now

    def _failed(self, method: str, pacer: EditPacer, exc: SlackApiError) -> Outcome:
        error = api_error(exc)
        if is_rate_limited(exc):
            self.stats.rate_limited += 1
            pacer.rate_limit_hit(self.channel, retry_after(exc), shared=True)
            return "retry"
        if error in _TRANSIENT or getattr(exc.response, "status_code", 200) >= 500:
            pacer.postpone(self.channel, TRANSIENT_BACKOFF)
            return "retry"
        if error in _GONE or error in _AUTH:
            level = logging.WARNING if error in _GONE else logging.ERROR
            log.log(level, "%s of %s in %s failed: %s", method, self.ts, self.channel, error)
            self._dead = True
            return "dead"
        self.stats.rejected += 1
        log.error("%s refused what reactbot sent (%s): skipped", method, error or exc)
        return "dropped"

    async def _continue(self) -> Outcome:
        """Slack closed the stream: the reply goes on in a new message of the same thread
        (the caller sends what was refused again). Refused on a new message too, the pieces
        get smaller; at the smallest, the stream is given up (the final state is posted)."""
        if self._fresh:
            self._piece_limit //= 2
            if self._piece_limit < MIN_PIECE:
                log.warning("Slack keeps closing the stream in %s; giving up", self.channel)
                self._dead = True
                return "dead"
        log.info("the stream %s in %s was closed by Slack; continuing", self.ts, self.channel)
        self._sent_tasks.clear()  # the new message shows the tasks again as they change
        try:
            self.ts = await self._start_stream(markdown_text=CONTINUED)
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not continue the stream in %s: %r", self.channel, exc)
            self._dead = True
            return "dead"
        self._fresh = True
        return "retry"

    # ---- the end --------------------------------------------------------------------------
    async def _finish(self) -> None:
        """Every task in its final status, the rest of the answer, how it ended, then stop
        with the totals and the feedback buttons."""
        attempts = 0
        while not self._dead and self._pending() and attempts < FINAL_ATTEMPTS * 4:
            async with self.pacers.append.slot(self.channel, priority="final"):
                outcome = await self._push()
            attempts += outcome == "retry"
        ending = ending_markdown(self.view)
        if ending and not self._dead:
            for _ in range(FINAL_ATTEMPTS):
                async with self.pacers.append.slot(self.channel, priority="final"):
                    if await self._append(markdown_text=ending) != "retry":
                        break
        if not self._dead and await self._stop():
            self.stats.final_visible_at = time.monotonic()
            return
        await self._post_final()

    async def _stop(self) -> bool:
        blocks = stop_blocks(self.view, self.run_id)
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
                    outcome = self._failed(STOP, self.pacers.stop, exc)
                except (aiohttp.ClientError, TimeoutError) as exc:
                    log.warning("chat.stopStream in %s failed: %r", self.channel, exc)
                    self.pacers.stop.postpone(self.channel, TRANSIENT_BACKOFF)
                    outcome = "retry"
            if outcome == "dropped":
                blocks = []  # the blocks refused: stop without them
            elif outcome == "dead":
                return False
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

    async def _post_final(self) -> None:
        """The stream died: the final state as a message of its own, so nothing is lost."""
        try:
            await post_root(
                self.client,
                channel=self.channel,
                thread_ts=self.thread_ts,
                message=SlackRenderer(run_id=self.run_id).final(self.view),
            )
            self.stats.final_visible_at = time.monotonic()
        except Exception:  # the log is all that is left
            log.exception("could not post the final state of run %s", self.run_id)

    def trace_surface(self, client: AsyncWebClient) -> SlackSurface:
        """Where the trace goes: the thread the reply is in."""
        return SlackSurface(
            client, channel=self.channel, ts=self.ts or self.thread_ts, thread_ts=self.thread_ts
        )
