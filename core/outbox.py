"""A run's events on their way to its one consumer, and the reading of one model reply.

``Outbox`` holds what the run produced and the consumer has not taken yet: a deque and one
waiter, cheaper per event than ``asyncio.Queue`` (a run has exactly one consumer). Text of
one kind and step that the consumer has not taken is merged, and streamed text wakes the
consumer at most once per ``text_latency``, so the consumer takes many chunks in one wake
instead of being woken for each.

``ReplyReader`` reads one reply's stream for a step format: the stall watchdog, the stream
closed however the reading ends, and everything in a chunk besides the reply text (notices,
reasoning, usage) recorded on the step and sent out.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass

from core.errors import ModelTimeout
from core.events import (
    AnswerDelta,
    Event,
    Notice,
    ReasoningDelta,
    ThoughtDelta,
    UsageCounted,
)
from core.llm import ModelChunk
from core.parser import ActionFound, AnswerText, ThoughtText
from core.pricing import Price
from core.trace import Trace, TraceStep

TextDelta = ThoughtDelta | AnswerDelta | ReasoningDelta

_DELTAS: dict[type, type[ThoughtDelta] | type[AnswerDelta]] = {
    ThoughtText: ThoughtDelta,
    AnswerText: AnswerDelta,
}
"""The parser's text events as the run's events (a look-up: it runs for every chunk)."""


@dataclass(slots=True)
class TextRun:
    """Text of one kind and step waiting for the consumer, in pieces."""

    kind: type[TextDelta]
    step: int
    parts: list[str]
    labelled: bool = True

    def event(self) -> TextDelta:
        if not self.labelled:
            return ThoughtDelta(self.step, "".join(self.parts), labelled=False)
        return self.kind(self.step, "".join(self.parts))


class Outbox:
    """The run's events not yet taken by its consumer (``Run.events`` drains it).

    The consumer waits in ``wait`` and takes everything pending in one wake. An event that
    changes what the run is doing (a step, an action, an observation, the outcome) wakes it at
    once; streamed text wakes it at most ``text_latency`` seconds after the first piece it has
    not taken, and pieces that arrive meanwhile join that piece instead of waking it again.
    With chunks a few milliseconds apart that is one wake for many chunks instead of one
    each; order is kept (text pending is taken before the event that follows it).
    """

    __slots__ = ("_loop", "_timer", "_waiter", "pending", "text_latency")

    def __init__(self, text_latency: float = 0.0) -> None:
        self.pending: deque[Event | TextRun] = deque()
        self.text_latency = text_latency
        self._loop = asyncio.get_running_loop()
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    async def wait(self) -> None:
        """Until something is pending (at once when it already is)."""
        if self.pending:
            return
        waiter = self._waiter = self._loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _wake(self) -> None:
        self._timer = None
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _text_arrived(self) -> None:
        """The first text the waiting consumer has not taken: wake it soon, not per chunk."""
        if self._waiter is None or self._timer is not None:
            return  # the consumer is busy (it drains before it waits again), or a wake is due
        if self.text_latency <= 0:
            self._wake()
        else:
            self._timer = self._loop.call_later(self.text_latency, self._wake)

    def emit(self, event: Event) -> None:
        self.pending.append(event)
        if self._waiter is not None:
            if self._timer is not None:
                self._timer.cancel()
            self._wake()

    def emit_text(self, kind: type[TextDelta], n: int, text: str) -> None:
        """Text for the consumer, merged into the same kind and step's text not taken yet."""
        pending = self.pending
        if pending:
            last = pending[-1]
            if type(last) is TextRun and last.kind is kind and last.step == n and last.labelled:
                last.parts.append(text)
                return
        pending.append(TextRun(kind, n, [text]))
        self._text_arrived()

    def emit_parsed(self, n: int, events: list[ThoughtText | AnswerText | ActionFound]) -> None:
        """The parser's text events: all of the batch is queued, then the consumer is woken
        once (``emit_text``, inline: this runs for nearly every chunk)."""
        pending = self.pending
        for event in events:
            delta = _DELTAS.get(type(event))
            if delta is None:  # ActionFound: announced once the whole reply is in
                continue
            last = pending[-1] if pending else None
            labelled = not (type(event) is ThoughtText and not event.labelled)
            if (
                type(last) is TextRun
                and last.kind is delta
                and last.step == n
                and last.labelled is labelled
            ):
                last.parts.append(event.text)  # type: ignore[union-attr]
            else:
                pending.append(TextRun(delta, n, [event.text], labelled))  # type: ignore[union-attr]
                self._text_arrived()


class ReplyReader:
    """Reads one model reply's stream on behalf of a step format."""

    def __init__(
        self,
        outbox: Outbox,
        trace: Trace,
        *,
        model_timeout: float,
        prices: Mapping[str, Price] | None = None,
    ) -> None:
        self.outbox = outbox
        self.trace = trace
        self.model_timeout = model_timeout
        self.prices = prices or {}
        """Each priced model's price, by model name: a step's cost is counted from it."""

    async def consume(
        self,
        n: int,
        step: TraceStep,
        stream: AsyncIterator[ModelChunk],
        on_chunk: Callable[[ModelChunk], bool],
    ) -> None:
        """Read the stream to its end (or until ``on_chunk`` says stop)."""
        async with self.reading(stream) as kick:
            async for chunk in stream:
                kick(chunk.pause)
                if chunk.notice or chunk.reasoning or chunk.usage is not None or chunk.refusal:
                    self.absorb(n, step, chunk)
                if on_chunk(chunk):
                    break

    @contextlib.asynccontextmanager
    async def reading(
        self, stream: AsyncIterator[ModelChunk]
    ) -> AsyncIterator[Callable[[float], None]]:
        """Around the reading of one reply: the stall watchdog (its ``kick`` is handed out:
        call it for every chunk) and the stream closed however the reading ends."""
        watchdog = StallWatchdog(self.model_timeout)
        try:
            with watchdog:
                yield watchdog.kick
        except TimeoutError as exc:  # the run's deadline arrives here as CancelledError
            if not watchdog.fired:
                raise ModelTimeout("The model call timed out (provider timeout).") from exc
            raise ModelTimeout(
                f"The model sent nothing for {self.model_timeout:g} s (provider timeout)."
            ) from exc
        finally:
            await _close_quietly(stream)

    def absorb(self, n: int, step: TraceStep, chunk: ModelChunk) -> None:
        """Everything in a chunk besides the reply text: notices, reasoning, usage, and a
        refusal (recorded on the step and shown as the answer as it streams)."""
        if chunk.notice:
            self.trace.notices.append(chunk.notice)
            self.outbox.emit(Notice("retrying", chunk.notice))
        if chunk.reasoning:
            step.reasoning += chunk.reasoning
            self.outbox.emit_text(ReasoningDelta, n, chunk.reasoning)
        if chunk.refusal:
            step.refusal += chunk.refusal
            self.outbox.emit_text(AnswerDelta, n, chunk.refusal)
        if chunk.usage is not None:
            usage = chunk.usage
            step.prompt_tokens = (step.prompt_tokens or 0) + usage.prompt_tokens
            step.completion_tokens = (step.completion_tokens or 0) + usage.completion_tokens
            price = self.prices.get(step.model)
            if price is not None:
                step.cost_usd = (step.cost_usd or 0.0) + price.cost(usage)
            self.outbox.emit(UsageCounted(n, usage))


async def _close_quietly(stream: AsyncIterator[ModelChunk]) -> None:
    """Release an abandoned stream (and its HTTP connection) at once."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()


class StallWatchdog:
    """Cancels the current task when no chunk arrived for ``seconds``; raises TimeoutError.

    One timer per model call, re-armed only when it fires, instead of a new timeout per chunk
    (a per-chunk ``asyncio.timeout`` was the largest single cost of the loop).
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self._loop = asyncio.get_running_loop()
        # kick() runs for every chunk: the default loop's time() is time.monotonic(), so call
        # that directly rather than through one more Python frame.
        default_clock = type(self._loop).time is asyncio.BaseEventLoop.time
        self._time: Callable[[], float] = time.monotonic if default_clock else self._loop.time
        self._last = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0

    def __enter__(self) -> StallWatchdog:
        self._task = asyncio.current_task()
        assert self._task is not None
        self._cancelling = self._task.cancelling()
        self.kick()
        self._handle = self._loop.call_at(self._last + self.seconds, self._check)
        return self

    def kick(self, grace: float = 0.0) -> None:
        """A chunk arrived; ``grace`` extends the next deadline (an announced back-off)."""
        self._last = self._time() + grace

    def _check(self) -> None:
        due = self._last + self.seconds
        if self._loop.time() >= due:
            self.fired = True
            assert self._task is not None
            self._task.cancel()
        else:
            self._handle = self._loop.call_at(due, self._check)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if self._handle is not None:
            self._handle.cancel()
        if self.fired and exc_type is asyncio.CancelledError:
            assert self._task is not None
            if self._task.uncancel() <= self._cancelling:
                raise TimeoutError from exc
