"""The ReAct loop.

``Agent.start(question)`` returns a ``Run``: the loop runs in a task the Run owns and puts
typed events on a queue that ``Run.events()`` drains. ``Run.cancel(by=...)`` stops it; every
run ends with exactly one of Finished, Failed or Cancelled, carrying the (partial) Trace.

Model faults (bad format, unknown tools, tool errors, repeated actions) go back to the model
as Observations and the loop goes on; transport faults end the run with a Failed event.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal, Protocol

from core import prompt
from core.errors import ModelError, ModelTimeout, StoreUnavailable, ToolError
from core.events import (
    ActionDecided,
    AnswerDelta,
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
    StepKind,
    StepStarted,
    ThoughtDelta,
    UsageCounted,
)
from core.history import HistoryStore, Message
from core.llm import ChatModel, ModelChunk
from core.memory import HistoryCompactor, answer_message
from core.parser import Action, ActionFound, AnswerText, ParseError, Step, StreamParser, ThoughtText
from core.stores import ConversationLocks, TraceStore
from core.tools import ToolRegistry, ToolResult
from core.trace import Trace, TraceStep, source_domain

log = logging.getLogger(__name__)

Approver = Callable[[Action], Awaitable[Action | None]]
"""Seam for a human approval step: return the (possibly edited) action, or None to deny."""


@dataclass(frozen=True, slots=True)
class AgentSettings:
    max_steps: int = 8
    model_timeout: float = 60.0
    """Seconds without a single chunk before a model call counts as stalled."""
    tool_timeout: float = 20.0
    deadline: float = 180.0
    format_retries: int = 2
    observation_limit: int = 2000
    store_steps: bool = False
    """Also store a compact form of the steps with each answer in the history."""
    approval_timeout: float = 300.0
    """Seconds a human approver may take before the action counts as denied."""
    max_question_chars: int = 4000
    """Longer questions are refused before any model call."""


class MemoryHealth(Protocol):
    """Reports, once per failure, that a conversation's memory was unavailable."""

    def take_notice(self, conversation: str) -> bool: ...


@dataclass(slots=True)
class _Reply:
    text: str
    step: Step | None
    error: str | None


@dataclass(slots=True)
class _State:
    messages: list[Message]
    last_action: tuple[str, str] | None = None


class Agent:
    def __init__(
        self,
        model: ChatModel,
        tools: ToolRegistry,
        *,
        history: HistoryStore | None = None,
        traces: TraceStore | None = None,
        locks: ConversationLocks | None = None,
        answer_model: ChatModel | None = None,
        compactor: HistoryCompactor | None = None,
        memory_health: MemoryHealth | None = None,
        settings: AgentSettings | None = None,
        approve: Approver | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.model = model
        self.tools = tools
        self.history = history
        self.traces = traces
        self.locks = locks
        self.answer_model = answer_model
        """Optional larger model that writes the final answer (the steps use ``model``)."""
        self.compactor = compactor
        self.memory_health = memory_health
        self.settings = settings or AgentSettings()
        self.approve = approve
        self._clock = clock

    def question_problem(self, question: str) -> str | None:
        """Why ``question`` is refused before any model call, in one sentence; else None."""
        limit = self.settings.max_question_chars
        if len(question) > limit:
            return f"The question is {len(question):,} characters long; the limit is {limit:,}."
        return None

    def start(self, question: str, *, conversation: str = "", user: str = "") -> Run:
        problem = self.question_problem(question)
        if problem is not None:  # the trace keeps what is needed to see why, not megabytes
            question = question[: self.settings.max_question_chars] + "…"
        trace = Trace(question=question, conversation=conversation, user=user)
        return Run(self, trace, refusal=problem)

    def run(self, question: str, *, conversation: str = "", user: str = "") -> AsyncIterator[Event]:
        """Convenience: start a run and iterate its events; closing the iterator early
        cancels the run (see ``Run.events``)."""
        return self.start(question, conversation=conversation, user=user).events()


INTERNAL_ERROR = "Something went wrong inside reactbot (logged)."

_FINAL_EVENTS = (Finished, Failed, Cancelled)
"""As a tuple: ``isinstance`` with ``A | B | C`` builds the union anew for every event."""


class Run:
    """One question being answered. Owns its task; safe to cancel from any coroutine."""

    def __init__(self, agent: Agent, trace: Trace, *, refusal: str | None = None) -> None:
        self.agent = agent
        self.trace = trace
        self._refusal = refusal
        """Why the question is refused before any model call (``Agent.question_problem``)."""
        self.settings = agent.settings
        # A deque and one wake-up event: cheaper per event than asyncio.Queue, and the run
        # has exactly one consumer.
        self._pending: deque[Event] = deque()
        self._arrived = asyncio.Event()
        self._stopped_by: str | None = None
        self._cancel_requested = False
        self._final: FinalEvent | None = None
        self._task = asyncio.get_running_loop().create_task(self._main())
        self._task.add_done_callback(self._ensure_final)

    # ---- public -------------------------------------------------------------------------
    def cancel(self, by: str | None = None) -> None:
        """Stop the run. The first call wins, and once the outcome is decided (the final
        event exists) a late Stop changes nothing."""
        if not self._task.done() and not self._cancel_requested and self._final is None:
            self._cancel_requested = True
            self._stopped_by = by
            self._task.cancel()

    async def events(self) -> AsyncIterator[Event]:
        """The run's events up to and including the final one. A consumer that stops early
        (breaks, is cancelled, closes the iterator) stops the run: nobody is listening."""
        try:
            while True:
                while not self._pending:
                    self._arrived.clear()
                    await self._arrived.wait()
                event = self._pending.popleft()
                yield event
                if isinstance(event, _FINAL_EVENTS):
                    return
        finally:
            if self._final is None or not self._task.done():
                await self.aclose()

    async def wait(self) -> FinalEvent:
        """The final event, once the run's task is over (it never raises the run's errors)."""
        if not self._task.done():  # asyncio.wait costs a loop turn even on a done task
            await asyncio.wait({self._task})
        assert self._final is not None
        return self._final

    async def aclose(self) -> None:
        """Cancel and wait; a cancellation of the caller is not swallowed here."""
        self.cancel()
        if not self._task.done():
            await asyncio.wait({self._task})

    @property
    def done(self) -> bool:
        return self._task.done()

    # ---- plumbing -----------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        self._pending.append(event)
        self._arrived.set()

    async def _end(self, event: FinalEvent) -> None:
        """Publish the outcome first (the user should not wait for storage), then store it."""
        self._publish(event)
        if self.agent.traces is not None:
            try:
                await self.agent.traces.save(self.trace)
            except StoreUnavailable:
                log.warning("trace %s not stored: trace store unavailable", self.trace.id)
            except Exception:
                log.exception("trace %s not stored", self.trace.id)

    def _publish(self, event: FinalEvent) -> None:
        self.trace.ended_at = self.agent._clock()
        self._final = event
        self._emit(event)

    def _ensure_final(self, task: asyncio.Task[None]) -> None:
        """Safety net: whatever ended the task (a cancel before it started, a bug in a store),
        the consumer still gets exactly one final event."""
        if self._final is not None:
            return
        if task.cancelled():
            self._publish(self._cancellation())
            return
        log.error("run %s ended without an outcome", self.trace.id, exc_info=task.exception())
        self._publish(self._failure(INTERNAL_ERROR, "internal"))

    async def _main(self) -> None:
        trace = self.trace
        trace.started_at = self.agent._clock()
        trace.models.append(self.agent.model.name)
        self._emit(
            RunStarted(trace.id, trace.question, self.agent.model.name, self.settings.max_steps)
        )
        if self._refusal is not None:
            await self._end(self._failure(self._refusal, "input"))
            return
        try:
            async with self._turn():
                trace.started_at = self.agent._clock()  # waiting for the lock is not run time
                async with asyncio.timeout(self.settings.deadline):
                    event: FinalEvent = await self._loop()
        except asyncio.CancelledError:
            await self._end(self._cancellation())
            return
        except TimeoutError:
            event = self._failure(
                f"No answer within the {self.settings.deadline:g} s limit for one question.",
                "deadline",
            )
        except ModelError as exc:
            kind: Literal["timeout", "model"] = (
                "timeout" if isinstance(exc, ModelTimeout) else "model"
            )
            event = self._failure(str(exc), kind)
        except Exception:
            log.exception("run %s failed with an internal error", trace.id)
            event = self._failure(INTERNAL_ERROR, "internal")
        await self._end(event)

    def _turn(self) -> AbstractAsyncContextManager[None]:
        """Serialises runs in one conversation; says so when this one has to wait."""
        locks, conversation = self.agent.locks, self.trace.conversation
        if locks is None or not conversation:
            return contextlib.nullcontext()

        def waiting() -> None:
            self._emit(Notice("waiting", "waiting for the previous question to finish"))

        return locks.hold(conversation, on_wait=waiting)

    def _cancellation(self) -> Cancelled:
        trace, by = self.trace, self._stopped_by
        trace.status, trace.stopped_by = "cancelled", by
        trace.reason = f"stopped by {by}" if by else "cancelled"
        self._close_open_step("cancelled")
        return Cancelled(trace, by)

    def _failure(
        self, reason: str, kind: Literal["timeout", "model", "deadline", "internal", "input"]
    ) -> Failed:
        self.trace.status, self.trace.reason = "failed", reason
        self._close_open_step(reason)
        return Failed(self.trace, reason, kind)

    def _close_open_step(self, reason: str) -> None:
        if self.trace.steps and not self.trace.steps[-1].ended_at:
            step = self.trace.steps[-1]
            step.ended_at = self.agent._clock()
            step.error = step.error or reason

    # ---- the loop -----------------------------------------------------------------------
    async def _loop(self) -> Finished:
        state = _State(await self._initial_messages())
        for n in range(1, self.settings.max_steps + 1):
            reply = await self._step(n, state)
            if reply.step is None:
                return await self._finish(reply.text, "unformatted", state)
            if reply.step.answer is not None:
                if self.agent.answer_model is not None:
                    return await self._rewrite_answer(n + 1, reply.step.answer, state)
                return await self._finish(reply.step.answer, "answered", state)
            assert reply.step.action is not None
            await self._act(n, reply.step.action, state)
        return await self._best_effort(state)

    async def _best_effort(self, state: _State) -> Finished:
        state.messages.append(prompt.best_answer_message(self.settings.max_steps))
        reply = await self._step(self.settings.max_steps + 1, state, kind="best_effort")
        if reply.step is not None and reply.step.answer is not None:
            return await self._finish(reply.step.answer, "best_effort", state)
        text = reply.text if reply.step is None else (reply.step.thought or reply.text)
        return await self._finish(text, "best_effort", state)

    async def _rewrite_answer(self, n: int, draft: str, state: _State) -> Finished:
        """The larger answer model writes the final answer from the steps and the draft."""
        model = self.agent.answer_model
        assert model is not None
        self.trace.models.append(model.name)
        state.messages.append(prompt.final_answer_message(draft))
        reply = await self._step(n, state, kind="answer", model=model)
        if reply.step is not None and reply.step.answer:
            return await self._finish(reply.step.answer, "answered", state)
        return await self._finish(draft, "answered", state)  # the draft is still an answer

    async def _step(
        self, n: int, state: _State, *, kind: StepKind = "step", model: ChatModel | None = None
    ) -> _Reply:
        """One model turn, re-asked up to ``format_retries`` times when the format is wrong."""
        model = model or self.agent.model
        self._emit(StepStarted(n, self.settings.max_steps, kind))
        for attempt in range(self.settings.format_retries + 1):
            step = self._open_step(n, "step" if kind == "step" else "final", model)
            reply = await self._call_model(n, step, state.messages, model)
            step.ended_at = self.agent._clock()
            state.messages.append({"role": "assistant", "content": reply.text})
            if reply.step is not None:
                step.thought = reply.step.thought or ""
                return reply
            step.kind, step.error = "format_error", reply.error
            if attempt == self.settings.format_retries:
                break
            self._emit(FormatRetry(n, attempt + 1, reply.error or "unreadable reply"))
            state.messages.append(prompt.correction_message(reply.error or "unreadable reply"))
        return _Reply(reply.text, None, reply.error)

    def _open_step(self, n: int, kind: Literal["step", "final"], model: ChatModel) -> TraceStep:
        step = TraceStep(index=n, kind=kind, started_at=self.agent._clock(), model=model.name)
        self.trace.steps.append(step)
        return step

    async def _call_model(
        self, n: int, step: TraceStep, messages: Sequence[Message], model: ChatModel
    ) -> _Reply:
        parser = StreamParser()
        cutter = _StopCutter(prompt.STOP)
        stream = model.stream(messages, stop=prompt.STOP)
        watchdog = _StallWatchdog(self.settings.model_timeout)
        # Bound once: the loop body runs for every chunk of every reply.
        kick, cut, parse = watchdog.kick, cutter.feed, parser.feed
        try:
            with watchdog:
                async for chunk in stream:
                    kick(grace=chunk.pause)
                    if chunk.notice or chunk.reasoning or chunk.usage is not None:
                        self._absorb(n, step, chunk)
                    if chunk.text:
                        parsed = parse(cut(chunk.text))
                        if parsed:
                            self._emit_parsed(n, parsed)
                        if cutter.stopped:
                            break
        except TimeoutError as exc:  # the run's deadline arrives here as CancelledError
            if not watchdog.fired:
                raise ModelTimeout("The model call timed out (provider timeout).") from exc
            raise ModelTimeout(
                f"The model sent nothing for {self.settings.model_timeout:g} s (provider timeout)."
            ) from exc
        finally:
            await _close_quietly(stream)
        self._emit_parsed(n, parser.close())
        step.raw = cutter.text
        try:
            return _Reply(cutter.text, parser.result(), None)
        except ParseError as exc:
            return _Reply(cutter.text, None, str(exc))

    def _absorb(self, n: int, step: TraceStep, chunk: ModelChunk) -> None:
        """Everything in a chunk besides the reply text: notices, reasoning, usage."""
        if chunk.notice:
            self.trace.notices.append(chunk.notice)
            self._emit(Notice("retrying", chunk.notice))
        if chunk.reasoning:
            step.reasoning += chunk.reasoning
            self._emit(ReasoningDelta(n, chunk.reasoning))
        if chunk.usage is not None:
            usage = chunk.usage
            step.prompt_tokens = (step.prompt_tokens or 0) + usage.prompt_tokens
            step.completion_tokens = (step.completion_tokens or 0) + usage.completion_tokens
            self._emit(UsageCounted(n, usage))

    def _emit_parsed(self, n: int, events: list[ThoughtText | AnswerText | ActionFound]) -> None:
        # _emit, inline: all of the batch is queued, then the consumer is woken once.
        pending = self._pending
        for event in events:
            if isinstance(event, ThoughtText):
                pending.append(ThoughtDelta(n, event.text))
            elif isinstance(event, AnswerText):
                pending.append(AnswerDelta(n, event.text))
            # ActionFound: announced once the whole reply is in and the action is final.
        if pending:
            self._arrived.set()

    async def _act(self, n: int, action: Action, state: _State) -> None:
        step = self.trace.steps[-1]
        self._decide(n, step, action)
        if self.agent.approve is not None:
            approved, refusal = await self._ask_approval(action)
            if approved is None:
                self._record_observation(n, step, action, refusal, True, (), 0.0, state)
                return
            if approved != action:  # edited by the approver: show and record the new one
                action = approved
                self._decide(n, step, action)
        started = self.agent._clock()
        text, error, sources = await self._run_tool(action)
        if state.last_action == (action.name, action.input):
            text = (
                "Note: this is the same action with the same input as your previous step, so it "
                "gives no new information. Use a different input, another tool, or finish.\n" + text
            )
        state.last_action = (action.name, action.input)
        seconds = self.agent._clock() - started
        self._record_observation(n, step, action, text, error, sources, seconds, state)

    async def _ask_approval(self, action: Action) -> tuple[Action | None, str]:
        assert self.agent.approve is not None
        limit = self.settings.approval_timeout
        try:
            async with asyncio.timeout(limit):
                approved = await self.agent.approve(action)
        except TimeoutError:
            return None, f"No approval within {limit:g} s, so the action was not run."
        return approved, "The user denied this action."

    def _decide(self, n: int, step: TraceStep, action: Action) -> None:
        step.action, step.action_input = action.name, action.input
        self._emit(ActionDecided(n, action.name, action.input))

    def _record_observation(
        self,
        n: int,
        step: TraceStep,
        action: Action,
        text: str,
        error: bool,
        sources: tuple[str, ...],
        seconds: float,
        state: _State,
    ) -> None:
        step.observation = text
        step.sources = list(sources)
        if error:
            step.error = text
        step.ended_at = self.agent._clock()
        self._emit(ObservationReady(n, action.name, text, error, seconds, sources))
        state.messages.append(prompt.observation_message(self._for_model(text)))

    async def _run_tool(self, action: Action) -> tuple[str, bool, tuple[str, ...]]:
        """Runs one tool; whatever goes wrong becomes text the model can act on."""
        tool = self.agent.tools.get(action.name)
        if tool is None:
            names = ", ".join([*self.agent.tools.names, "finish"])
            return (
                f"Unknown action '{action.name}'. Available actions: {names}. "
                "Write one of them as Action: name[input].",
                True,
                (),
            )
        try:
            async with asyncio.timeout(self.settings.tool_timeout):
                result = await tool.run(action.input)
        except TimeoutError:
            return (
                f"Error: {tool.name} did not finish within {self.settings.tool_timeout:g} s.",
                True,
                (),
            )
        except ToolError as exc:
            return f"Error: {exc}", True, ()
        except Exception as exc:
            log.exception("tool %s raised", tool.name)
            return (
                f"Error: the {tool.name} tool failed unexpectedly ({type(exc).__name__}).",
                True,
                (),
            )
        if isinstance(result, ToolResult):
            return result.text, False, result.sources
        return result, False, ()

    def _for_model(self, text: str) -> str:
        limit = self.settings.observation_limit
        if len(text) <= limit:
            return text
        return (
            text[:limit]
            + f"\n[… {len(text) - limit} more characters cut; the trace keeps the full text]"
        )

    # ---- history ------------------------------------------------------------------------
    async def _initial_messages(self) -> list[Message]:
        history: list[Message] = []
        store, conversation = self.agent.history, self.trace.conversation
        if store is not None and conversation:
            try:
                history = await store.load(conversation)
                if self.agent.compactor is not None:
                    history = await self.agent.compactor.fit(conversation, history, store=store)
            except StoreUnavailable:
                self._memory_unavailable()
            self._check_memory_health()
        return prompt.build_messages(self.agent.tools, history, self.trace.question)

    def _check_memory_health(self) -> None:
        health = self.agent.memory_health
        if health is not None and health.take_notice(self.trace.conversation):
            self._memory_unavailable()

    def _memory_unavailable(self) -> None:
        text = "memory unavailable: answering without the conversation's history"
        if text not in self.trace.notices:
            self.trace.notices.append(text)
            self._emit(Notice("memory", text))

    async def _finish(
        self, answer: str, status: Literal["answered", "unformatted", "best_effort"], state: _State
    ) -> Finished:
        answer = answer.strip()
        self.trace.answer, self.trace.status = answer, status
        self.trace.cited = cited_sources(answer, self.trace)
        if self.agent.history is not None and self.trace.conversation:
            try:
                await self.agent.history.append(
                    self.trace.conversation,
                    prompt.question_message(self.trace.question),
                    answer_message(self.trace, with_steps=self.settings.store_steps),
                )
            except StoreUnavailable:
                self._memory_unavailable()
            self._check_memory_health()
        return Finished(self.trace, answer, status)


def cited_sources(answer: str, trace: Trace, *, limit: int = 3) -> list[str]:
    """The URLs the answer relied on: those it names (by URL or domain), else the top results."""
    sources = trace.sources
    named = [url for url in sources if url in answer or _names_domain(answer, url)]
    if named:
        return named[:limit]
    last_with_sources = next((s for s in reversed(trace.steps) if s.sources), None)
    return last_with_sources.sources[:limit] if last_with_sources else []


def _names_domain(answer: str, url: str) -> bool:
    domain = source_domain(url)
    return bool(domain) and domain in answer


async def _close_quietly(stream: AsyncIterator[ModelChunk]) -> None:
    """Release an abandoned stream (and its HTTP connection) at once."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()


class _StallWatchdog:
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

    def __enter__(self) -> _StallWatchdog:
        self._task = asyncio.current_task()
        assert self._task is not None
        self._cancelling = self._task.cancelling()
        self.kick()
        self._handle = self._loop.call_at(self._last + self.seconds, self._check)
        return self

    def kick(self, *, grace: float = 0.0) -> None:
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


@functools.cache
def _cut_plan(markers: tuple[str, ...]) -> tuple[int, str, str | None]:
    """What _StopCutter derives from its markers, once per set of markers (one per model call)."""
    firsts = {m[:1] for m in markers}
    lead = firsts.pop() if len(firsts) == 1 else ""
    only = markers[0] if len(markers) == 1 and markers[0] else None
    return max(len(m) for m in markers) - 1, lead, only


class _StopCutter:
    """Cuts the reply at the first stop marker, for providers that ignore ``stop``.

    Only the new text plus a marker-sized tail is searched, so the cost stays linear.
    """

    def __init__(self, markers: Sequence[str]) -> None:
        self.markers = markers
        self._tail, self._lead, self._marker = _cut_plan(tuple(markers))
        """The tail to keep; a character every marker starts with (chunks without it need no
        search), else ""; the only marker when there is just one (a single find, no min())."""
        self._parts: list[str] = []
        self._seen = 0
        self._recent = ""
        """The last ``_tail`` characters seen, less any start that holds no ``_lead`` (no marker
        can begin there): empty most of the time, which lets most chunks skip the search."""
        self._cut_at: int | None = None
        self.stopped = False
        """A marker was found (a plain attribute: it is read after every chunk)."""

    def feed(self, chunk: str) -> str:
        """Returns the text to pass on; a marker straddling chunks is found too."""
        lead = self._lead
        if lead and not self._recent and lead not in chunk:
            # No marker can start in this chunk nor in the tail before it.
            self._parts.append(chunk)
            self._seen += len(chunk)
            return chunk
        window = self._recent + chunk
        cut = -1
        if self._marker is not None:
            if lead in window:
                cut = window.find(self._marker)
        elif not lead or lead in window:
            cut = min((i for m in self.markers if (i := window.find(m)) != -1), default=-1)
        start = self._seen - len(self._recent)
        self._parts.append(chunk)
        self._seen += len(chunk)
        recent = window[-self._tail :] if self._tail else ""
        if lead:
            at = recent.find(lead)
            recent = recent[at:] if at > 0 else recent if at == 0 else ""
        self._recent = recent
        if cut == -1:
            return chunk
        self._cut_at = start + cut
        self.stopped = True
        return chunk[: max(0, cut - (len(window) - len(chunk)))]

    @property
    def text(self) -> str:
        joined = "".join(self._parts)
        return joined if self._cut_at is None else joined[: self._cut_at]
