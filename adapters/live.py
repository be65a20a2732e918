"""The live message, once for every chat platform.

Three parts, each testable alone:

- ``RunView``: the state of one run, built by applying core events (pure, no I/O). Platform
  renderers are pure functions of it.
- ``EditPacer`` (``adapters.pacing``): each channel's real allowance, shared by all runs of
  one bot process and spent by priority: a final state goes the moment the platform allows,
  a run's first update right after, live updates keep an edit in reserve for them. One busy
  channel never slows another.
- ``LiveMessage``: drives one placeholder message: applies events, edits the message with
  the latest rendering when the channel allows (coalesced: latest state wins), and on
  the final event edits it to its final state at once (retrying through rate limits, never dropping
  it; when the platform refuses the payload itself, a compact rendering and then plain text
  go instead) and posts the trace into a thread.

Platforms implement ``Surface`` (edit the message, post into its thread) and a ``Renderer``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar, assert_never, cast, get_args

from adapters import words
from adapters.pacing import EditPacer, Priority
from core.errors import ReactbotError
from core.events import (
    ActionDecided,
    AnswerDelta,
    ApprovalDecided,
    ApprovalOutcome,
    ApprovalRequested,
    Cancelled,
    Event,
    Failed,
    FinalEvent,
    Finished,
    FormatRetry,
    Notice,
    ObservationReady,
    ReasoningDelta,
    RunStarted,
    StepStarted,
    ThoughtDelta,
    UsageCounted,
)
from core.tools.base import ToolDisplay
from core.trace import ApprovalRecord, Trace, steps_made

log = logging.getLogger(__name__)

P = TypeVar("P")
P_contra = TypeVar("P_contra", contravariant=True)

Phase = Literal[
    "starting",
    "reading",
    "waiting",
    "thinking",
    "acting",
    "approval",
    "retrying",
    "answering",
    "answered",
    "refused",
    "unformatted",
    "best_effort",
    "failed",
    "cancelled",
]
EditOutcome = Literal["sent", "retry", "rejected"]
"""``retry``: try the same payload again later; ``rejected``: it will never be accepted."""

FINAL_PHASES: frozenset[Phase] = frozenset(
    {"answered", "refused", "unformatted", "best_effort", "failed", "cancelled"}
)
ANSWER_PHASES: frozenset[Phase] = frozenset({"answered", "refused", "unformatted", "best_effort"})

PHASE_STATUS: dict[Phase, tuple[str, str]] = {
    "starting": ("⏳", "Starting"),
    "reading": ("📎", words.READING_FILES),
    "waiting": ("⏳", "Waiting for the previous question"),
    "retrying": ("🔁", "Retrying after a rate limit"),
    "answering": ("✍️", "Writing the answer"),
    "approval": ("✋", "Waiting for approval"),
}
"""What a run is doing, in every surface's live status line; any other phase is thinking."""
FINAL_MARKS: dict[Phase, str] = {
    "answered": "✅",
    "refused": "🚫",
    "cancelled": "⏹️",
    "failed": "❌",
}
"""A finished run's mark in its footer; any other ending is ⚠️."""


def final_mark(phase: Phase) -> str:
    return FINAL_MARKS.get(phase, "⚠️")


def status_line(
    view: RunView,
    now: float,
    *,
    shown: Callable[[str], str] = lambda name: name[:40],
    still_while_pending: bool = False,
) -> str:
    """``🔎 Searching · step 2/8 · 3.4 s``: the phase (a running tool in its own words,
    ``words.acting``, with ``shown`` rendering a tool's name for the surface), the step, the
    seconds; with ``still_while_pending`` the seconds stand still while a person decides (the
    message is then not edited every tick)."""
    if view.phase == "acting":
        step = view.current
        name = shown((step.action if step else None) or "tool")
        emoji, label = words.acting(step.display if step else None, name)
    elif view.phase == "reading" and view.status_text:  # the files wait their turn
        emoji, label = "📎", view.status_text
    else:
        emoji, label = PHASE_STATUS.get(view.phase, ("🤔", "Thinking"))
    parts = [f"{emoji} {label}"]
    step = view.current
    if step is not None and view.max_steps:
        parts.append("final answer" if step.final else f"step {step.index}/{view.max_steps}")
    if still_while_pending and view.pending is not None:
        now = min(now, view.pending_since)
    parts.append(f"{view.elapsed(now):.1f} s")
    return " · ".join(parts)


"""Final phases whose message is the answer (a refusal is the model's answer)."""
REFUSED_NOTE = "the model declined to answer"
"""What a footer says of a run whose answer is the model's refusal."""


class EditDeferred(ReactbotError):
    """Raised by a Surface when an edit should be tried again after ``retry_after`` seconds
    (a 5xx, a dropped connection). The next edit carries the latest state anyway."""

    def __init__(self, retry_after: float, reason: str = "") -> None:
        super().__init__(reason or f"edit deferred for {retry_after:.2f} s")
        self.retry_after = retry_after


class EditRejected(ReactbotError):
    """Raised by a Surface when the platform refused the payload itself (a 4xx other than
    429: too long, invalid blocks, a field over its limit). Sending it again cannot help; a
    smaller rendering may, so the final edit falls back to ``compact`` and then ``plain``."""


class RateLimited(EditDeferred):
    """The platform answered 429. ``shared`` means the limit covers every channel (Slack's
    per-workspace method limits), not just this one."""

    def __init__(self, retry_after: float, *, shared: bool = False) -> None:
        super().__init__(retry_after, f"rate limited for {retry_after:.2f} s")
        self.shared = shared


def approval_words(event: ApprovalDecided) -> str:
    """``✅ approved by ada``: a decision in the words every surface and the trace use."""
    return ApprovalRecord(
        event.outcome, event.by, reason=event.reason, remembered=event.remembered
    ).describe()


def _decided(step: int, call: int, record: ApprovalRecord | None) -> ApprovalDecided | None:
    if record is None or record.outcome not in _OUTCOMES:
        return None
    outcome = cast(ApprovalOutcome, record.outcome)
    by, reason = record.by, record.reason
    return ApprovalDecided(step, call, outcome, by, record.input or "", reason, record.remembered)


_OUTCOMES = frozenset(get_args(ApprovalOutcome))


def _final_event(trace: Trace) -> FinalEvent:
    """The final event a finished trace stands for (an interrupted run reads as failed)."""
    match trace.status:
        case "answered" | "refused" | "unformatted" | "best_effort" as status:
            return Finished(trace, trace.answer or "", status)
        case "cancelled":
            return Cancelled(trace, trace.stopped_by)
        case _:
            return Failed(trace, trace.reason or "The run did not finish.", "internal")


# ---- state ------------------------------------------------------------------------------


@dataclass(slots=True)
class StepView:
    index: int
    thought: str = ""
    reasoning: str = ""
    action: str | None = None
    action_input: str | None = None
    observation: str | None = None
    error: bool = False
    sources: tuple[str, ...] = ()
    final: bool = False
    call: int = 0
    """0 for the step's (first) action; 1, 2, ... for the further native tool calls of the
    same reply, each a StepView of its own with the same ``index``."""
    approval: ApprovalDecided | None = None
    """How a person decided on this action, when its tool needed approval."""
    display: ToolDisplay | None = None
    """How its tool shows itself at work (``ActionDecided.display``)."""

    @property
    def done(self) -> bool:
        return self.observation is not None


Verbosity = Literal["full", "compact", "answer"]
"""How much of a run a channel sees: ``full`` every step live and the trace in a thread;
``compact`` a one-line live status, the answer and the thread; ``answer`` only the answer
(a request for approval still shows; the trace is stored, and a thread opens only for an
answer too long for its message)."""
VERBOSITIES: tuple[Verbosity, ...] = ("full", "compact", "answer")


@dataclass(slots=True)
class RunView:
    """Everything a renderer needs; ``apply`` is the only way it changes."""

    question: str = ""
    heard: str = ""
    """The question was a voice note: ``🎤 0:07 · transcript``, shown first."""
    header: str = ""
    """A scheduled run's first line (``⏰ Scheduled by ada · every monday 09:00 …``, from
    ``adapters.scheduled``), shown above everything; the asker is then named by it alone."""
    asker: str = ""
    max_steps: int = 0
    model: str = ""
    mode: str = "text"
    phase: Phase = "starting"
    status_text: str = ""
    steps: list[StepView] = field(default_factory=list)
    answer: str = ""
    tokens: int = 0
    format_retries: int = 0
    notices: list[str] = field(default_factory=list)
    memory_unavailable: bool = False
    """The run answered without the conversation's history (the store was down)."""
    pending: ApprovalRequested | None = None
    """The action waiting for a person's decision; renderers show its buttons."""
    pending_since: float = 0.0
    approvers: str = "asker"
    """Who may decide (``agent.approval.approvers``), for the line that says so."""
    verbosity: Verbosity = "full"
    reason: str = ""
    stopped_by: str | None = None
    final: FinalEvent | None = None
    started_at: float = field(default_factory=time.monotonic)
    ended_at: float | None = None

    @property
    def is_final(self) -> bool:
        return self.phase in FINAL_PHASES

    @property
    def current(self) -> StepView | None:
        return self.steps[-1] if self.steps else None

    @property
    def trace(self) -> Trace | None:
        return self.final.trace if self.final is not None else None

    @property
    def steps_made(self) -> int:
        """The steps the run made, as its trace counts them once it ended (an open step the
        model wrote nothing in is none of them)."""
        return steps_made(self.trace) if self.trace is not None else len(self.steps)

    def elapsed(self, now: float | None = None) -> float:
        end = self.ended_at if self.ended_at is not None else (now or time.monotonic())
        return max(0.0, end - self.started_at)

    @classmethod
    def of_trace(cls, trace: Trace, *, verbosity: Verbosity = "full") -> RunView:
        """The final view of a finished run as its trace recorded it, so a page reloaded
        later draws the same steps, answer and sources its live message showed."""
        view = cls(
            question=trace.question,
            asker=trace.user,
            model=trace.models[0] if trace.models else "",
            mode=trace.mode,
            verbosity=verbosity,
            started_at=trace.started_at,
        )
        for step in trace.steps:
            if step.kind == "format_error":
                continue
            view.steps.append(
                StepView(
                    step.index,
                    thought=step.thought,
                    reasoning=step.reasoning,
                    action=step.action,
                    action_input=step.action_input,
                    observation=step.observation,
                    error=step.error is not None,
                    sources=tuple(step.sources),
                    final=step.kind == "final",
                    call=step.call,
                    approval=_decided(step.index, step.call, step.approval),
                )
            )
        view.apply(_final_event(trace))
        view.ended_at = trace.ended_at
        return view

    def apply(self, event: Event) -> None:
        match event:
            case RunStarted(question=question, model=model, max_steps=max_steps, mode=mode):
                self.question, self.model, self.max_steps = question, model, max_steps
                self.mode = mode
                self.phase = "thinking"
            case StepStarted(step=n):
                self.steps.append(StepView(n, final=event.final))
                self.phase, self.status_text = "thinking", ""
                self.answer = ""  # a new call writes its own answer (e.g. the answer model)
            case ThoughtDelta(text=text):
                self._step().thought += text
            case ReasoningDelta(text=text):
                self._step().reasoning += text
            case AnswerDelta(text=text):
                self.answer += text
                self.phase = "answering"
            case ActionDecided(name=name, input=arg, call=call):
                step = self._call_step(event.step, call)
                step.action, step.action_input = name, arg
                step.display = event.display
                self.phase = "acting"
            case ApprovalRequested():
                self.pending, self.pending_since = event, time.monotonic()
                self.phase = "approval"
            case ApprovalDecided(step=n, call=call):
                self._call_step(n, call).approval = event
                if self.pending is not None and (self.pending.step, self.pending.call) == (n, call):
                    self.pending = None
                self.phase = "acting"
            case ObservationReady(text=text, error=error, sources=sources, call=call):
                step = self._call_step(event.step, call)
                step.observation, step.error, step.sources = text, error, sources
                if all(s.done for s in self.steps if s.index == step.index and s.action):
                    self.phase = "thinking"
            case FormatRetry(reason=reason):
                self.format_retries += 1
                self.answer = ""
                step = self._step()
                step.thought = ""
                self.status_text = f"reply did not follow the format ({reason}); re-asking"
            case UsageCounted(usage=usage):
                self.tokens += usage.total_tokens
            case Notice(kind=kind, text=text):
                self.notices.append(text)
                self.status_text = text
                if kind == "memory":
                    self.memory_unavailable = True
                elif kind == "waiting":
                    self.phase = "waiting"
                elif kind == "reading":
                    self.phase = "reading"
                elif kind == "retrying":
                    self.phase = "retrying"
            case Finished(answer=answer, status=status):
                self.pending = None
                self._end(event)
                self.answer, self.phase = answer, status
            case Failed(reason=reason):
                self._end(event)
                self.phase, self.reason = "failed", reason
            case Cancelled(by=by):
                self._end(event)
                self.phase, self.stopped_by = "cancelled", by
            case _:
                assert_never(event)

    def _step(self) -> StepView:
        if not self.steps:  # events always start a step first; be lenient anyway
            self.steps.append(StepView(1))
        return self.steps[-1]

    def _call_step(self, index: int, call: int) -> StepView:
        """The view of one action of step ``index``: the step itself for its first action,
        a view of its own (same index, no thought) for each further parallel call."""
        if call == 0:
            return self._step()
        for step in reversed(self.steps):
            if step.index == index and step.call == call:
                return step
        step = StepView(index, call=call, final=self._step().final)
        self.steps.append(step)
        return step

    def _end(self, event: FinalEvent) -> None:
        self.pending = None
        self.final = event
        self.ended_at = time.monotonic()
        self.tokens = event.trace.total_tokens or self.tokens


# ---- the driver -------------------------------------------------------------------------


class Surface(Protocol[P_contra]):
    """The platform primitives LiveMessage needs, bound to one placeholder message."""

    @property
    def channel_key(self) -> str:
        """Rate-limit scope of edits (the channel id)."""
        ...

    async def edit(self, payload: P_contra) -> None:
        """Replace the message's content; raise RateLimited on a 429."""
        ...

    async def post_trace(self, trace: Trace, posts: Sequence[P_contra]) -> None:
        """Open a thread on the message (or use the one it is in) and post ``posts`` there."""
        ...


class Renderer(Protocol[P]):
    def live(self, view: RunView) -> P: ...

    def final(self, view: RunView) -> P: ...

    def compact(self, view: RunView) -> P:
        """The final state in a smaller form: what is sent when ``final``'s is refused."""
        ...

    def trace_posts(
        self, trace: Trace, *, whole_answer: bool = False, steps: bool = True
    ) -> list[P]:
        """The thread; ``whole_answer``: the message could show only a compact or plain form,
        so the thread starts with the entire answer (else with what did not fit). Without
        ``steps``, only that answer: nothing at all when it fitted."""
        ...

    def plain(self, text: str) -> P:
        """A bare message holding ``text``: the fallback when rendering itself fails."""
        ...


@dataclass(slots=True)
class LiveStats:
    edits: int = 0
    rate_limited: int = 0
    rejected: int = 0
    """Edits the platform refused outright (too long, invalid blocks)."""
    first_text_at: float | None = None
    first_visible_at: float | None = None
    final_at: float | None = None
    """When the run's final event arrived (the model's last token, or the error)."""
    final_visible_at: float | None = None
    """When the platform confirmed the final edit."""
    edit_times: list[float] = field(default_factory=list)


def fallback_text(view: RunView) -> str:
    """The final state in plain words, for when the platform renderer fails."""
    if view.phase in ANSWER_PHASES and view.answer:
        text = view.answer
    elif view.phase == "cancelled":
        text = "⏹️ Stopped."
    else:
        text = f"❌ {view.reason or 'The run failed.'}"
    return f"{text}\n\n(reactbot could not format this message; the trace is in the thread)"


_QUIET = RunStarted | StepStarted | UsageCounted
"""Events that change nothing a reader would miss: they wait for the next content or tick,
so the channel's edit slot is still free when the first words arrive."""


class LiveMessage(Generic[P]):
    """Renders one run into one message, within the channel's pace."""

    FINAL_ATTEMPTS = 8
    ERROR_BACKOFF = 1.0
    LIVE_EDIT_GRACE = 5.0
    """Seconds a live edit already sent may take to finish before the final edit goes."""

    def __init__(
        self,
        surface: Surface[P],
        renderer: Renderer[P],
        pacer: EditPacer,
        *,
        view: RunView | None = None,
        tick: float = 1.0,
    ) -> None:
        self.surface = surface
        self.renderer = renderer
        self.pacer = pacer
        self.view = view or RunView()
        self.tick = tick
        """Re-render at least this often while working, so the elapsed seconds move."""
        self.stats = LiveStats()
        self._dirty = asyncio.Event()
        self._last_payload: P | None = None
        self._last_rejected: P | None = None
        self._shown_pending: ApprovalRequested | None = None
        self._stopping = False
        self._editing = False
        self._shown_whole = True
        """The final edit that went out was ``final`` itself, not a smaller fallback."""

    async def follow(self, events: AsyncIterator[Event]) -> RunView:
        """Consume the run's events until the final one; the message ends in a final state."""
        with self.pacer.following():  # until its final edit: the pacer keeps one for it
            await self._follow(events)
            await self._edit_final()
        trace = self.view.trace
        if trace is not None:
            await self._post_trace(trace)
        return self.view

    async def _follow(self, events: AsyncIterator[Event]) -> None:
        flusher = asyncio.get_running_loop().create_task(self._flush_loop())
        try:
            async for event in events:
                self._note_text(event)
                self.view.apply(event)
                if not isinstance(event, _QUIET):
                    self._dirty.set()
                if self.view.is_final:
                    self.stats.final_at = time.monotonic()
                    break
        finally:
            await self._stop_flusher(flusher)
        if not self.view.is_final:  # the event stream ended early: never leave "thinking"
            self.view.phase, self.view.reason = "failed", "The run ended without a result."
            self.stats.final_at = time.monotonic()

    async def _stop_flusher(self, flusher: asyncio.Task[None]) -> None:
        """End live updates before the final edit. One already sent is let finish (bounded):
        cut off, its request could still reach the platform after the final one and put the
        message back to a running state. One still waiting for its slot is dropped."""
        self._stopping = True
        if self._editing:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(flusher), self.LIVE_EDIT_GRACE)
        flusher.cancel()
        try:
            await flusher
        except asyncio.CancelledError:
            pass
        except Exception:  # live updates died; the final state must still be sent
            log.exception("live updates failed")

    def _note_text(self, event: Event) -> None:
        if self.stats.first_text_at is None and isinstance(event, ThoughtDelta | AnswerDelta):
            self.stats.first_text_at = time.monotonic()

    async def _flush_loop(self) -> None:
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.tick):
                    await self._dirty.wait()
            self._dirty.clear()
            async with self.pacer.slot(self.surface.channel_key, priority=self._priority()):
                if self._stopping:
                    return
                # Rendered once the slot is ours, so the edit carries the latest state.
                try:
                    payload = self.renderer.live(self.view)
                except Exception:  # skip this update; the final message has its own fallback
                    log.exception("rendering the live message failed")
                    continue
                self._editing = True
                try:
                    await self._try_edit(payload)
                finally:
                    self._editing = False

    def _priority(self) -> Priority:
        """A request for a person's decision goes like a final: the run waits on it. A run's
        first words skip the channel's live spacing. Everything else is a live update."""
        if self.view.pending is not None and self.view.pending is not self._shown_pending:
            return "final"
        stats = self.stats
        if stats.edits == 0 or (stats.first_text_at is not None and stats.first_visible_at is None):
            return "first"
        return "live"

    async def _try_edit(self, payload: P) -> EditOutcome:
        if payload == self._last_payload:
            return "sent"
        if payload == self._last_rejected:
            return "rejected"
        channel = self.surface.channel_key
        pending = self.view.pending  # what this payload shows (the view may move meanwhile)
        try:
            await self._edit_counted(channel, payload)
        except RateLimited as exc:
            self.stats.rate_limited += 1
            self.pacer.rate_limit_hit(channel, exc.retry_after, shared=exc.shared)
            return "retry"
        except EditDeferred as exc:
            log.warning("edit in %s deferred %.1f s: %s", channel, exc.retry_after, exc)
            self.pacer.postpone(channel, exc.retry_after)
            return "retry"
        except EditRejected as exc:
            log.warning("the platform refused an edit in %s: %s", channel, exc)
            self._last_rejected = payload
            self.stats.rejected += 1
            return "rejected"
        except Exception:  # a live edit must never end the run's display; the next one may work
            log.exception("edit in %s failed", channel)
            self.pacer.postpone(channel, self.ERROR_BACKOFF)
            return "retry"
        self._last_payload = payload
        if pending is not None and pending is not self._shown_pending:
            pending.shown()  # its buttons are on screen: the time to decide starts now
        self._shown_pending = pending
        now = time.monotonic()
        self.stats.edits += 1
        self.pacer.stats.edits += 1
        self.stats.edit_times.append(now)
        if self.stats.first_visible_at is None and self.stats.first_text_at is not None:
            self.stats.first_visible_at = now
        return "sent"

    async def _edit_counted(self, channel: str, payload: P) -> None:
        """The edit, and whatever further requests the surface made for it (a shortened
        retry, say) charged to the channel's allowance, whether it worked or not."""
        before = getattr(self.surface, "extra_requests", 0)
        try:
            await self.surface.edit(payload)
        finally:
            made = getattr(self.surface, "extra_requests", 0) - before
            if made > 0:
                await self.pacer.charge(channel, made)

    async def _edit_final(self) -> None:
        """The final state, and smaller forms of it when the platform refuses the larger one:
        the message must never stay in its running state."""
        for whole, payload in self._final_payloads():
            outcome = await self._send_final(payload)
            self._shown_whole = whole
            if outcome == "sent":
                self.stats.final_visible_at = time.monotonic()
                return
            if outcome == "retry":
                log.error("gave up on the final edit after %d attempts", self.FINAL_ATTEMPTS)
                return
        log.error("the platform refused every form of the final message")

    def _final_payloads(self) -> Iterator[tuple[bool, P]]:
        """``(is the full final rendering, payload)``, largest first."""
        for whole, render in ((True, self.renderer.final), (False, self.renderer.compact)):
            try:
                yield whole, render(self.view)
            except Exception:
                log.exception("rendering the final message failed")
        yield False, self.renderer.plain(fallback_text(self.view))

    async def _send_final(self, payload: P) -> EditOutcome:
        outcome: EditOutcome = "retry"
        for _ in range(self.FINAL_ATTEMPTS):  # failures postpone the channel's next slot
            async with self.pacer.slot(self.surface.channel_key, priority="final"):
                outcome = await self._try_edit(payload)
            if outcome != "retry":
                break
        return outcome

    async def _post_trace(self, trace: Trace) -> None:
        try:
            posts = self.renderer.trace_posts(
                trace, whole_answer=not self._shown_whole, steps=self.view.verbosity != "answer"
            )
            if posts:  # "answer" verbosity with an answer that fitted: no thread
                await self.surface.post_trace(trace, posts)
        except Exception:  # the answer is already visible; a missing thread is logged
            log.exception("could not post the trace of run %s", trace.id)
