"""The ReAct loop.

``Agent.start(question)`` returns a ``Run``: the loop runs in a task the Run owns and puts
typed events on a queue that ``Run.events()`` drains. ``Run.cancel(by=...)`` stops it; every
run ends with exactly one of Finished, Failed or Cancelled, carrying the (partial) Trace.

Model faults (bad format, unknown tools, tool errors, repeated actions) go back to the model
as Observations and the loop goes on; transport faults end the run with a Failed event.

Three modes ask the model for its steps in three ways and yield the same events and Trace:
``text`` (ReAct text, ``core.parser``), ``tools`` (native tool calls, several per reply run
concurrently, each with its own Observation) and ``json`` (one JSON object per reply, its
thought streamed live; a provider that refuses JSON schemas gets ``json_object``, then text).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Literal, Protocol

from core import modes, prompt
from core.approval import Allowances, ApprovalRequest, Approver, Decision
from core.errors import (
    ModelError,
    ModelTimeout,
    ResponseFormatRefused,
    StoreUnavailable,
    ToolError,
)
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
    Mode,
    Notice,
    ObservationReady,
    ReasoningDelta,
    RunStarted,
    StepKind,
    StepStarted,
    ThoughtDelta,
    UsageCounted,
)
from core.history import HistoryStore
from core.llm import ChatModel, Message, ModelChunk
from core.memory import HistoryCompactor, answer_message
from core.modes import JsonFieldStreamer, JsonFormat, ToolCall, ToolCallAssembler
from core.observe import Probes, RunObserver, WatchedModel
from core.parser import Action, ActionFound, AnswerText, ParseError, Step, StreamParser, ThoughtText
from core.pricing import Price
from core.stores import ConversationLocks, TraceStore
from core.tools import Attachment, Tool, ToolRegistry, ToolResult, needs_approval
from core.tools.schema import parameters_of, tool_input, tool_specs
from core.trace import (
    ATTACHMENT_BYTES_PER_TRACE,
    ApprovalRecord,
    Trace,
    TraceAttachment,
    TraceStep,
    decoded_size,
    source_domain,
)

log = logging.getLogger(__name__)


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
    """Seconds a person may take to decide before the action counts as denied."""
    approval_tools: frozenset[str] = frozenset()
    """Lower-cased names of tools whose every run needs approval (``agent.approval.tools``);
    tools whose hints are not read-only need it anyway (``core.tools.needs_approval``)."""
    approval_remember: bool = True
    """Offer "Allow for this conversation"."""
    max_question_chars: int = 4000
    """Longer questions are refused before any model call."""
    mode: Mode = "text"
    """``text``, ``tools`` or ``json``: how the model is asked for its steps."""
    parallel_tools: int = 4
    """Native tool calls of one reply that run at the same time."""
    system_prompt: str | None = None
    """A custom system prompt (``prompt.system_prompt``'s template); None: the built-in one."""


class MemoryHealth(Protocol):
    """Reports, once per failure, that a conversation's memory was unavailable."""

    def take_notice(self, conversation: str) -> bool: ...


@dataclass(slots=True)
class _Reply:
    text: str
    step: Step | None
    error: str | None
    calls: list[ToolCall] = field(default_factory=list)
    """Native tool calls (``tools`` mode): the step's actions, in index order."""


@dataclass(slots=True)
class _State:
    messages: list[Message]
    last_actions: frozenset[tuple[str, str]] = frozenset()


@dataclass(slots=True)
class _Outcome:
    """What running one action gave: the Observation and how long it took."""

    text: str
    error: bool
    sources: tuple[str, ...] = ()
    seconds: float = 0.0
    attachments: tuple[Attachment, ...] = ()


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
        allowances: Allowances | None = None,
        observers: Sequence[RunObserver] = (),
        clock: Callable[[], float] = time.time,
        prices: Mapping[str, Price] | None = None,
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
        """Asked when a tool needs a person's approval (``core.approval``); without one,
        such tools are denied with a note saying so."""
        self.allowances = allowances
        self.observers = list(observers)
        """Told about each run's model calls, tool calls and end (metrics, telemetry)."""
        self._clock = clock
        self.prices: dict[str, Price] = dict(prices or {})
        """Each priced model's price, by model name: a step's cost is counted from it."""
        self.json_formats = modes.JsonFormats()
        """The strictest ``response_format`` each model took, by model name."""

    def question_problem(self, question: str) -> str | None:
        """Why ``question`` is refused before any model call, in one sentence; else None."""
        limit = self.settings.max_question_chars
        if len(question) > limit:
            return f"The question is {len(question):,} characters long; the limit is {limit:,}."
        return None

    def start(
        self,
        question: str,
        *,
        conversation: str = "",
        user: str = "",
        mode: Mode | None = None,
        model: ChatModel | None = None,
        tools: ToolRegistry | None = None,
        persona: str = "",
        images: Sequence[str] = (),
    ) -> Run:
        """A running answer to ``question``. For this run only: ``mode`` overrides the
        settings' mode, ``model`` and ``tools`` the agent's own (a channel's choice),
        ``persona`` is added below the core instructions (``prompt.persona_section``), and
        ``images`` (``data:`` URLs) go with the question to a model that reads images."""
        problem = self.question_problem(question)
        if problem is not None:  # the trace keeps what is needed to see why, not megabytes
            question = question[: self.settings.max_question_chars] + "…"
        chosen = mode or self.settings.mode
        if chosen == "json" and self.json_formats.for_model((model or self.model).name) is None:
            chosen = "text"  # this model's endpoint refused every JSON format before
        trace = Trace(
            question=question,
            conversation=conversation,
            user=user,
            mode=chosen,
            persona=persona.strip()[: prompt.PERSONA_CHARS],
        )
        trace.system_prompt = self.settings.system_prompt
        if images:
            trace.notices.append(f"{len(images)} attached image(s) shown to the model")
        run = Run(self, trace, refusal=problem, model=model, tools=tools)
        run.images = list(images)
        return run

    def run(
        self, question: str, *, conversation: str = "", user: str = "", mode: Mode | None = None
    ) -> AsyncIterator[Event]:
        """Convenience: start a run and iterate its events; closing the iterator early
        cancels the run (see ``Run.events``)."""
        return self.start(question, conversation=conversation, user=user, mode=mode).events()


INTERNAL_ERROR = "Something went wrong inside reactbot (logged)."
REPEAT_NOTE = (
    "Note: this is the same action with the same input as your previous step, so it "
    "gives no new information. Use a different input, another tool, or finish.\n"
)
"""Put before the Observation of an action that repeats the previous step's."""
EDIT_NOTE = "Note: a person edited the input before it ran; it ran as "
"""How the Observation of an action a person edited begins (then ``name[input].``)."""

TextDelta = ThoughtDelta | AnswerDelta | ReasoningDelta

_DELTAS: dict[type, type[ThoughtDelta] | type[AnswerDelta]] = {
    ThoughtText: ThoughtDelta,
    AnswerText: AnswerDelta,
}
"""The parser's text events as the run's events (a look-up: it runs for every chunk)."""


@dataclass(slots=True)
class _TextRun:
    """Text of one kind and step waiting for the consumer, in pieces: ``Run._emit_text``."""

    kind: type[TextDelta]
    step: int
    parts: list[str]
    labelled: bool = True

    def event(self) -> TextDelta:
        if not self.labelled:
            return ThoughtDelta(self.step, "".join(self.parts), labelled=False)
        return self.kind(self.step, "".join(self.parts))


_FINAL_EVENTS = (Finished, Failed, Cancelled)
"""As a tuple: ``isinstance`` with ``A | B | C`` builds the union anew for every event."""


class Run:
    """One question being answered. Owns its task; safe to cancel from any coroutine."""

    def __init__(
        self,
        agent: Agent,
        trace: Trace,
        *,
        refusal: str | None = None,
        model: ChatModel | None = None,
        tools: ToolRegistry | None = None,
    ) -> None:
        self.agent = agent
        self.trace = trace
        self.model = model or agent.model
        self.answer_model = agent.answer_model if model is None else None
        """The default model's answer model; a run on its own model (a channel's or a
        question's pick) answers with that model, as chosen."""
        self.tools = tools if tools is not None else agent.tools
        self.images: list[str] = []
        """Sent with the question (not kept in the history: the next turn has its text)."""
        self._refusal = refusal
        """Why the question is refused before any model call (``Agent.question_problem``)."""
        self.settings = agent.settings
        # A deque and one wake-up event: cheaper per event than asyncio.Queue, and the run
        # has exactly one consumer.
        self._pending: deque[Event | _TextRun] = deque()
        self._arrived = asyncio.Event()
        self._stopped_by: str | None = None
        self._cancel_requested = False
        self._final: FinalEvent | None = None
        self._deadline: asyncio.Timeout | None = None
        self._probes = Probes(agent.observers, trace) if agent.observers else None
        self._task = asyncio.get_running_loop().create_task(self._main())
        self._task.add_done_callback(self._ensure_final)

    @property
    def mode(self) -> Mode:
        mode = self.trace.mode
        return mode if mode in ("tools", "json") else "text"  # type: ignore[return-value]

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
                if type(event) is _TextRun:
                    event = event.event()
                yield event  # type: ignore[misc]
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

    def _emit_text(self, kind: type[TextDelta], n: int, text: str) -> None:
        """Text for the consumer; merged into the text of the same kind and step that it
        has not taken yet, so a consumer that falls behind the model takes what piled up
        as one event instead of one per chunk."""
        pending = self._pending
        if pending:
            last = pending[-1]
            if type(last) is _TextRun and last.kind is kind and last.step == n and last.labelled:
                last.parts.append(text)
                return
        pending.append(_TextRun(kind, n, [text]))
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
        if self._probes is not None:
            self._probes.end(event)

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
        trace.models.append(self.model.name)
        self._emit(
            RunStarted(
                trace.id,
                trace.question,
                self.model.name,
                self.settings.max_steps,
                self.mode,
            )
        )
        if self._refusal is not None:
            await self._end(self._failure(self._refusal, "input"))
            return
        try:
            async with self._turn():
                trace.started_at = self.agent._clock()  # waiting for the lock is not run time
                async with asyncio.timeout(self.settings.deadline) as self._deadline:
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
            if reply.calls:
                await self._act_calls(n, reply.calls, state)
                continue
            if reply.step.answer is not None:
                if self.answer_model is not None:
                    return await self._rewrite_answer(n + 1, reply.step.answer, state)
                return await self._finish(reply.step.answer, "answered", state)
            assert reply.step.action is not None
            await self._act(n, reply.step.action, state)
        return await self._best_effort(state)

    async def _best_effort(self, state: _State) -> Finished:
        state.messages.append(prompt.best_answer_message(self.settings.max_steps, self.mode))
        reply = await self._step(self.settings.max_steps + 1, state, kind="best_effort")
        if reply.step is not None and reply.step.answer is not None:
            return await self._finish(reply.step.answer, "best_effort", state)
        text = reply.text if reply.step is None else (reply.step.thought or reply.text)
        return await self._finish(text, "best_effort", state)

    async def _rewrite_answer(self, n: int, draft: str, state: _State) -> Finished:
        """The larger answer model writes the final answer from the steps and the draft."""
        model = self.answer_model
        assert model is not None
        self.trace.models.append(model.name)
        state.messages.append(prompt.final_answer_message(draft, self.mode))
        reply = await self._step(n, state, kind="answer", model=model)
        if reply.step is not None and reply.step.answer:
            return await self._finish(reply.step.answer, "answered", state)
        return await self._finish(draft, "answered", state)  # the draft is still an answer

    async def _step(
        self, n: int, state: _State, *, kind: StepKind = "step", model: ChatModel | None = None
    ) -> _Reply:
        """One model turn, re-asked up to ``format_retries`` times when the format is wrong."""
        model = model or self.model
        if self._probes is not None:
            model = WatchedModel(model, self._probes, n)
        self._emit(StepStarted(n, self.settings.max_steps, kind))
        for attempt in range(self.settings.format_retries + 1):
            step = self._open_step(n, "step" if kind == "step" else "final", model)
            reply = await self._call_model(n, step, state, model, final=kind != "step")
            step.ended_at = self.agent._clock()
            state.messages.append(_assistant_message(reply))
            if reply.step is not None:
                step.thought = reply.step.thought or ""
                return reply
            step.kind, step.error = "format_error", reply.error
            if attempt == self.settings.format_retries:
                break
            reason = reply.error or "unreadable reply"
            self._emit(FormatRetry(n, attempt + 1, reason))
            state.messages.append(prompt.correction_message(reason, self.mode))
        return _Reply(reply.text, None, reply.error)

    def _open_step(self, n: int, kind: Literal["step", "final"], model: ChatModel) -> TraceStep:
        step = TraceStep(index=n, kind=kind, started_at=self.agent._clock(), model=model.name)
        self.trace.steps.append(step)
        return step

    async def _call_model(
        self, n: int, step: TraceStep, state: _State, model: ChatModel, *, final: bool
    ) -> _Reply:
        """One request in the run's mode; ``final``: the answer is due, offer no tools."""
        if self.mode == "tools":
            return await self._call_tools(n, step, state.messages, model, offer_tools=not final)
        if self.mode == "json":
            return await self._call_json(n, step, state, model)
        return await self._call_text(n, step, state.messages, model)

    async def _call_text(
        self, n: int, step: TraceStep, messages: Sequence[Message], model: ChatModel
    ) -> _Reply:
        parser = StreamParser()
        parse = parser.feed  # bound once: it runs for every chunk
        parts: list[str] = []
        keep = parts.append
        stream = model.stream(messages, stop=prompt.STOP)
        # The commonest loop of all, written out rather than through _consume's callback.
        async with self._reading(stream) as kick:
            async for chunk in stream:
                kick(chunk.pause)
                if chunk.notice or chunk.reasoning or chunk.usage is not None:
                    self._absorb(n, step, chunk)
                if chunk.text:
                    keep(chunk.text)
                    parsed = parse(chunk.text)
                    if parsed:
                        self._emit_parsed(n, parsed)
                    if parser.observed:  # a provider that ignores stop: the rest is invented
                        break
        self._emit_parsed(n, parser.close())
        raw = step.raw = _cut_at_stop("".join(parts))
        try:
            return _Reply(raw, parser.result(), None)
        except ParseError as exc:
            return _Reply(raw, None, str(exc))

    async def _call_tools(
        self,
        n: int,
        step: TraceStep,
        messages: Sequence[Message],
        model: ChatModel,
        *,
        offer_tools: bool,
    ) -> _Reply:
        assembler = ToolCallAssembler()
        parts: list[str] = []
        finish: list[str] = []
        label = _ContentLabel(n, self._emit_text, answer_only=not offer_tools)

        def on_chunk(chunk: ModelChunk) -> bool:
            if chunk.text:
                parts.append(chunk.text)
                label.text(chunk.text)
            if chunk.tool_calls:
                label.call()
                assembler.feed(chunk.tool_calls)
            if chunk.finish:
                finish.append(chunk.finish)
            return False

        specs = tool_specs(self.tools) if offer_tools and len(self.tools) else None
        await self._consume(n, step, model.stream(messages, stop=(), tools=specs), on_chunk)
        label.end()
        content = "".join(parts).strip()
        step.raw = content
        calls = assembler.calls()
        if calls:
            return _Reply(content, Step(content or None, None, None), None, calls)
        if content:
            return _Reply(content, Step(None, None, content), None)
        cut_off = finish and finish[-1] == "length"
        return _Reply("", None, "the reply was cut off" if cut_off else "the reply is empty")

    async def _call_json(self, n: int, step: TraceStep, state: _State, model: ChatModel) -> _Reply:
        formats = self.agent.json_formats
        while (json_format := formats.for_model(model.name)) is not None:
            try:
                return await self._json_attempt(n, step, state.messages, model, json_format)
            except ResponseFormatRefused:
                self._json_refused(formats.refused(model.name, json_format), state)
        return await self._call_text(n, step, state.messages, model)

    async def _json_attempt(
        self,
        n: int,
        step: TraceStep,
        messages: Sequence[Message],
        model: ChatModel,
        json_format: JsonFormat,
    ) -> _Reply:
        streamer = JsonFieldStreamer()
        parts: list[str] = []

        def on_chunk(chunk: ModelChunk) -> bool:
            if chunk.text:
                parts.append(chunk.text)
                for name, text in streamer.feed(chunk.text):
                    self._emit_text(ThoughtDelta if name == "thought" else AnswerDelta, n, text)
            return False

        format_ = modes.response_format(json_format)
        await self._consume(
            n, step, model.stream(messages, stop=(), response_format=format_), on_chunk
        )
        text = "".join(parts)
        step.raw = text
        try:
            return _Reply(text, modes.json_step(text), None)
        except ParseError as exc:
            return _Reply(text, None, str(exc))

    def _json_refused(self, fallback: JsonFormat | None, state: _State) -> None:
        """Say the fall back to ``fallback``, once; past ``json_object``, the run goes on as
        text."""
        if fallback == "json_object":
            text = "the model endpoint does not take JSON schemas; asking for a JSON object"
        else:
            self.trace.mode = "text"
            state.messages[0] = {
                "role": "system",
                "content": prompt.system_prompt(
                    self.tools, "text", self.trace.persona, self.settings.system_prompt
                ),
            }
            text = "the model endpoint does not take JSON output; answering in text mode"
        self.trace.notices.append(text)
        self._emit(Notice("info", text))

    async def _consume(
        self,
        n: int,
        step: TraceStep,
        stream: AsyncIterator[ModelChunk],
        on_chunk: Callable[[ModelChunk], bool],
    ) -> None:
        """Read one reply's stream to its end (or until ``on_chunk`` says stop)."""
        async with self._reading(stream) as kick:
            async for chunk in stream:
                kick(chunk.pause)
                if chunk.notice or chunk.reasoning or chunk.usage is not None:
                    self._absorb(n, step, chunk)
                if on_chunk(chunk):
                    break

    @contextlib.asynccontextmanager
    async def _reading(
        self, stream: AsyncIterator[ModelChunk]
    ) -> AsyncIterator[Callable[[float], None]]:
        """Around the reading of one reply: the stall watchdog (its ``kick`` is handed out:
        call it for every chunk) and the stream closed however the reading ends."""
        watchdog = _StallWatchdog(self.settings.model_timeout)
        try:
            with watchdog:
                yield watchdog.kick
        except TimeoutError as exc:  # the run's deadline arrives here as CancelledError
            if not watchdog.fired:
                raise ModelTimeout("The model call timed out (provider timeout).") from exc
            raise ModelTimeout(
                f"The model sent nothing for {self.settings.model_timeout:g} s (provider timeout)."
            ) from exc
        finally:
            await _close_quietly(stream)

    def _absorb(self, n: int, step: TraceStep, chunk: ModelChunk) -> None:
        """Everything in a chunk besides the reply text: notices, reasoning, usage."""
        if chunk.notice:
            self.trace.notices.append(chunk.notice)
            self._emit(Notice("retrying", chunk.notice))
        if chunk.reasoning:
            step.reasoning += chunk.reasoning
            self._emit_text(ReasoningDelta, n, chunk.reasoning)
        if chunk.usage is not None:
            usage = chunk.usage
            step.prompt_tokens = (step.prompt_tokens or 0) + usage.prompt_tokens
            step.completion_tokens = (step.completion_tokens or 0) + usage.completion_tokens
            price = self.agent.prices.get(step.model)
            if price is not None:
                step.cost_usd = (step.cost_usd or 0.0) + price.cost(usage)
            self._emit(UsageCounted(n, usage))

    def _emit_parsed(self, n: int, events: list[ThoughtText | AnswerText | ActionFound]) -> None:
        # _emit, inline: all of the batch is queued, then the consumer is woken once.
        for event in events:
            delta = _DELTAS.get(type(event))
            if delta is None:  # ActionFound: announced once the whole reply is in
                continue
            pending = self._pending  # _emit_text, inline: this runs for nearly every chunk
            last = pending[-1] if pending else None
            labelled = not (type(event) is ThoughtText and not event.labelled)
            if (
                type(last) is _TextRun
                and last.kind is delta
                and last.step == n
                and last.labelled is labelled
            ):
                last.parts.append(event.text)  # type: ignore[union-attr]
            else:
                pending.append(_TextRun(delta, n, [event.text], labelled))  # type: ignore[union-attr]
                self._arrived.set()

    async def _act(self, n: int, action: Action, state: _State) -> None:
        step = self.trace.steps[-1]
        self._decide(n, step, action)
        approved, outcome = await self._approved(n, step, action, step.thought)
        if outcome is None:
            outcome = await self._run_tool(approved, state, n)
        state.last_actions = frozenset({(approved.name, approved.input)})
        self._record_observation(n, step, approved, outcome, state)

    async def _act_calls(self, n: int, calls: list[ToolCall], state: _State) -> None:
        """A reply's native tool calls: each an action of step ``n``, run concurrently (at
        most ``parallel_tools`` at once), answered in order by a ``tool`` message each."""
        first = self.trace.steps[-1]
        planned: list[tuple[TraceStep, Action, _Outcome | None]] = []
        for k, call in enumerate(calls):
            step = first if k == 0 else self._call_step(first, k)
            step.call_id = call.id
            action, problem = self._native_action(call)
            self._decide(n, step, action, call=k)
            planned.append((step, action, problem))
        approved: list[tuple[TraceStep, Action, _Outcome | None]] = []
        for step, action, problem in planned:  # a person decides one action at a time
            if problem is None:
                action, problem = await self._approved(n, step, action, first.thought)
            approved.append((step, action, problem))
        limit = asyncio.Semaphore(max(1, self.settings.parallel_tools))

        async def run(step: TraceStep, action: Action, ready: _Outcome | None) -> _Outcome:
            if ready is not None:
                return ready
            async with limit:
                return await self._run_tool(action, state, n, step.call_id)

        outcomes = await asyncio.gather(*(run(s, a, ready) for s, a, ready in approved))
        state.last_actions = frozenset((a.name, a.input) for _, a, _ in approved)
        for (step, action, _), outcome in zip(approved, outcomes, strict=True):
            self._record_observation(n, step, action, outcome, state, call=step.call)

    def _call_step(self, first: TraceStep, call: int) -> TraceStep:
        """The trace record of a further native call in the same reply (not a model step)."""
        step = TraceStep(
            index=first.index,
            kind=first.kind,
            started_at=self.agent._clock(),
            model=first.model,
            call=call,
        )
        self.trace.steps.append(step)
        return step

    def _native_action(self, call: ToolCall) -> tuple[Action, _Outcome | None]:
        """The Action a native call stands for, its input as ``Tool.run`` takes it (the
        string itself for a one-string tool, so the trace reads as in text mode); with an
        Observation already decided when the call cannot run as written."""
        name = call.name.strip()
        tool = self.tools.get(name)
        if tool is None:
            return Action(name, call.arguments), None  # _run_tool names the real tools
        try:
            return Action(tool.name, tool_input(tool, call.arguments, native=True)), None
        except ToolError as exc:
            return Action(tool.name, call.arguments), _Outcome(f"Error: {exc}", True)

    async def _approved(
        self, n: int, step: TraceStep, action: Action, thought: str = ""
    ) -> tuple[Action, _Outcome | None]:
        """The action as a person decided on it, when its tool needs approval: approved
        (perhaps edited), or denied with the Observation the model will read."""
        tool = self.tools.get(action.name)
        if tool is None or not needs_approval(tool, self.settings.approval_tools):
            return action, None
        conversation = self.trace.conversation
        allowances = self.agent.allowances
        if allowances is not None and conversation:
            by = await self._allowed_by(allowances, conversation, tool.name)
            if by is not None:
                self._record_decision(n, step, "allowed", by, action.input)
                return action, None
        if self.agent.approve is None:
            note = "This tool needs a person's approval, and nobody here can give it."
            self._record_decision(n, step, "denied", None, action.input, note)
            return action, _Outcome(note, True)
        decision = await self._ask(n, step, tool, action, thought)
        if decision is None:
            limit = self.settings.approval_timeout
            self._record_decision(n, step, "timeout", None, action.input)
            return action, _Outcome(
                f"No decision within {limit:g} s, so the action was not run.", True
            )
        if decision.verdict == "deny":
            self._record_decision(n, step, "denied", decision.by, action.input, decision.reason)
            reason = f" Their reason: {decision.reason}" if decision.reason else ""
            return action, _Outcome("The user denied this action." + reason, True)
        if decision.verdict == "always" and allowances is not None and conversation:
            with contextlib.suppress(StoreUnavailable):
                await allowances.allow(conversation, tool.name, by=decision.by)
        if decision.verdict == "edit" and decision.input is not None:
            edited = Action(action.name, decision.input)
            self._record_decision(n, step, "edited", decision.by, edited.input, decision.reason)
            assert step.approval is not None
            step.approval.input = action.input
            self._decide(n, step, edited, call=step.call)
            return edited, None
        remembered = decision.verdict == "always"
        self._record_decision(n, step, "approved", decision.by, action.input, remembered=remembered)
        return action, None

    async def _ask(
        self, n: int, step: TraceStep, tool: Tool, action: Action, thought: str
    ) -> Decision | None:
        """Ask the approver; None when nobody decided in time. The run's deadline stands
        still while a person is deciding."""
        assert self.agent.approve is not None
        limit = self.settings.approval_timeout
        request = ApprovalRequest(
            run_id=self.trace.id,
            conversation=self.trace.conversation,
            asker=self.trace.user,
            step=n,
            call=step.call,
            thought=thought or step.thought,
            name=tool.name,
            input=action.input,
            json_input=parameters_of(tool) is not None,
            timeout=limit,
            remember=self.settings.approval_remember and bool(self.trace.conversation),
        )
        self._emit(
            ApprovalRequested(
                n,
                step.call,
                tool.name,
                action.input,
                request.thought,
                limit,
                request.json_input,
                request.remember,
            )
        )
        with self._deadline_paused():
            try:
                async with asyncio.timeout(limit):
                    return await self.agent.approve(request)
            except TimeoutError:
                return None

    @contextlib.contextmanager
    def _deadline_paused(self) -> Iterator[None]:
        """The run's deadline stands still while a person decides: it is lifted, then set
        again as far ahead as the wait took."""
        deadline = self._deadline
        when = deadline.when() if deadline is not None else None
        if deadline is None or when is None:
            yield
            return
        loop = asyncio.get_running_loop()
        paused = loop.time()
        deadline.reschedule(None)
        try:
            yield
        finally:
            deadline.reschedule(when + (loop.time() - paused))

    async def _allowed_by(self, allowances: Allowances, conversation: str, tool: str) -> str | None:
        try:
            return await allowances.allowed(conversation, tool)
        except StoreUnavailable:
            return None

    def _record_decision(
        self,
        n: int,
        step: TraceStep,
        outcome: ApprovalOutcome,
        by: str | None,
        runs: str,
        reason: str = "",
        *,
        remembered: bool = False,
    ) -> None:
        step.approval = ApprovalRecord(outcome, by, self.agent._clock(), None, reason, remembered)
        self._emit(ApprovalDecided(n, step.call, outcome, by, runs, reason, remembered))

    def _decide(self, n: int, step: TraceStep, action: Action, *, call: int = 0) -> None:
        step.action, step.action_input = action.name, action.input
        self._emit(ActionDecided(n, action.name, action.input, call))

    def _record_observation(
        self,
        n: int,
        step: TraceStep,
        action: Action,
        outcome: _Outcome,
        state: _State,
        *,
        call: int = 0,
    ) -> None:
        if step.approval is not None and step.approval.outcome == "edited" and not outcome.error:
            outcome.text = f"{EDIT_NOTE}{action.name}[{action.input}].\n" + outcome.text
        step.observation = outcome.text
        step.sources = list(outcome.sources)
        step.attachments = kept_attachments(self.trace, outcome.attachments)
        if outcome.error:
            step.error = outcome.text
        step.ended_at = self.agent._clock()
        self._emit(
            ObservationReady(
                n, action.name, outcome.text, outcome.error, outcome.seconds, outcome.sources, call
            )
        )
        for_model = self._for_model(outcome.text)
        if step.call_id is not None:
            state.messages.append(prompt.tool_message(step.call_id, for_model))
        else:
            state.messages.append(prompt.observation_message(for_model))

    async def _run_tool(
        self, action: Action, state: _State, n: int, call_id: str | None = None
    ) -> _Outcome:
        """Runs one tool; whatever goes wrong becomes text the model can act on."""
        started = self.agent._clock()
        if self._probes is None:
            outcome = await self._tool_outcome(action)
        else:
            probe = self._probes.tool_call(n, call_id, action.name, action.input)
            try:
                outcome = await self._tool_outcome(action)
            except BaseException:  # the run was stopped (tool errors are outcomes)
                probe.end("cancelled", True)
                raise
            probe.end(outcome.text, outcome.error)
        if (action.name, action.input) in state.last_actions:
            outcome.text = REPEAT_NOTE + outcome.text
        outcome.seconds = self.agent._clock() - started
        return outcome

    async def _tool_outcome(self, action: Action) -> _Outcome:
        tool = self.tools.get(action.name)
        if tool is None:
            names = ", ".join([*self.tools.names, "finish"])
            return _Outcome(
                f"Unknown action '{action.name}'. Available actions: {names}. "
                "Write one of them as Action: name[input].",
                True,
            )
        try:
            argument = tool_input(tool, action.input)
            async with asyncio.timeout(self.settings.tool_timeout):
                result = await tool.run(argument)
        except TimeoutError:
            return _Outcome(
                f"Error: {tool.name} did not finish within {self.settings.tool_timeout:g} s.", True
            )
        except ToolError as exc:
            return _Outcome(f"Error: {exc}", True)
        except Exception as exc:
            log.exception("tool %s raised", tool.name)
            return _Outcome(
                f"Error: the {tool.name} tool failed unexpectedly ({type(exc).__name__}).", True
            )
        if isinstance(result, ToolResult):
            return _Outcome(result.text, False, result.sources, attachments=result.attachments)
        return _Outcome(result, False)

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
        messages = prompt.build_messages(
            self.tools,
            history,
            self.trace.question,
            mode=self.mode,
            persona=self.trace.persona,
            template=self.settings.system_prompt,
        )
        if self.images:
            messages[-1]["images"] = self.images
        return messages

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


def kept_attachments(trace: Trace, attachments: Sequence[Attachment]) -> list[TraceAttachment]:
    """A tool's attachments as the trace keeps them: the bytes while the trace has room
    (``ATTACHMENT_BYTES_PER_TRACE``), else only what they were."""
    room = ATTACHMENT_BYTES_PER_TRACE - sum(
        len(a.data) for step in trace.steps for a in step.attachments if a.data is not None
    )
    kept = []
    for attachment in attachments:
        data = attachment.data if len(attachment.data) <= room else None
        room -= len(data or "")
        size = decoded_size(attachment.data)
        kept.append(TraceAttachment(attachment.mime_type, size, data, attachment.name))
    return kept


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


class _ContentLabel:
    """Is a ``tools``-mode reply's text its Thought (a tool call follows) or its Answer (none
    does)? Only the end of the reply tells, so the text is held until a call starts (then it
    was the thought), or until it outgrows one short sentence (the prompt asks for one
    before a call; longer is the answer streaming), or until the reply ends (the answer)."""

    LONGEST_THOUGHT = 240

    def __init__(
        self, n: int, emit: Callable[[type[TextDelta], int, str], None], *, answer_only: bool
    ) -> None:
        self._n = n
        self._emit = emit
        self._held: list[str] = []
        self._size = 0
        self._kind: type[ThoughtDelta] | type[AnswerDelta] | None = (
            AnswerDelta if answer_only else None
        )

    def text(self, text: str) -> None:
        if self._kind is not None:
            self._emit(self._kind, self._n, text)
            return
        self._held.append(text)
        self._size += len(text)
        if self._size > self.LONGEST_THOUGHT:
            self._release(AnswerDelta)

    def call(self) -> None:
        if self._kind is None:
            self._release(ThoughtDelta)

    def end(self) -> None:
        if self._kind is None:
            self._release(AnswerDelta)

    def _release(self, kind: type[ThoughtDelta] | type[AnswerDelta]) -> None:
        self._kind = kind
        held = "".join(self._held)
        self._held.clear()
        if held.strip():
            self._emit(kind, self._n, held)


def _assistant_message(reply: _Reply) -> Message:
    """The model's reply as it goes back into the conversation (with its native calls)."""
    message: Message = {"role": "assistant", "content": reply.text}
    if reply.calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.calls
        ]
    return message


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


def _cut_at_stop(text: str) -> str:
    """The reply up to the first stop marker (what a provider honouring ``stop`` sends)."""
    found = [at for marker in prompt.STOP if (at := text.find(marker)) != -1]
    return text[: min(found)] if found else text
