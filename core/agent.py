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
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal

from core import modes, prompt
from core.acting import Approvals, Outcome, Tools
from core.approval import Allowances, Approver
from core.cuts import shorten
from core.errors import (
    ModelError,
    ModelTimeout,
    StoreUnavailable,
)
from core.events import (
    ActionDecided,
    Cancelled,
    Event,
    Failed,
    FinalEvent,
    Finished,
    FinishedStatus,
    FormatRetry,
    Mode,
    Notice,
    ObservationReady,
    RunStarted,
    StepKind,
    StepStarted,
)
from core.formats import Reply, Request, StepFormat, assistant_message, formats_for
from core.history import HistoryStore
from core.llm import ChatModel, Message
from core.memories import Asking, Memories
from core.memory import HistoryCompactor, Memory, MemoryHealth
from core.modes import ToolCall
from core.observe import Probes, RunObserver, WatchedModel
from core.outbox import Outbox, ReplyReader, TextRun
from core.parser import Action
from core.pricing import Price
from core.remembering import RunMemory
from core.speech import Heard
from core.stores import ConversationLocks, Stores, TraceStore
from core.tools import Attachment, ToolRegistry, display_of
from core.trace import (
    ATTACHMENT_BYTES_PER_TRACE,
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
    """Seconds a person may take to decide before the action counts as denied, counted from
    when the request is on screen (``ApprovalRequested.shown``)."""
    approval_show_within: float = 30.0
    """Seconds a request may wait to be shown (a message held back by a rate limit) before
    its ``approval_timeout`` starts anyway."""
    approval_tools: frozenset[str] = frozenset()
    """Lower-cased names of tools whose every run needs approval (``agent.approval.tools``);
    tools whose hints are not read-only need it anyway (``core.tools.needs_approval``)."""
    approval_remember: bool = True
    """Offer "Allow for this conversation"."""
    max_question_chars: int = 4000
    """Longer questions are refused before any model call."""
    attachment_max_bytes: int = 10 * 1024 * 1024
    """A tool's image or audio larger than this is listed in the trace, not kept (nor
    attached to the answer): ``files.max_bytes``."""
    mode: Mode = "text"
    """``text``, ``tools`` or ``json``: how the model is asked for its steps."""
    parallel_tools: int = 4
    """Native tool calls of one reply that run at the same time."""
    system_prompt: str | None = None
    """A custom system prompt (``prompt.system_prompt``'s template); None: the built-in one."""


@dataclass(slots=True)
class _State:
    messages: list[Message]
    last_actions: frozenset[tuple[str, str]] = frozenset()


class Agent:
    def __init__(
        self,
        model: ChatModel,
        tools: ToolRegistry,
        *,
        stores: Stores | None = None,
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
        memories: Memories | None = None,
    ) -> None:
        self.model = model
        self.memories = memories
        """What people asked to remember (``core.memories``); None: ``memory.enabled`` off."""
        self.tools = tools
        # The bundle every surface shares; a single keyword stands for one store (a bare
        # agent in a test that needs only history, say) and wins over the bundle's.
        if stores is not None:
            history = history or stores.history
            traces = traces or stores.traces
            locks = locks or stores.locks
            allowances = allowances or stores.allowances
            memory_health = memory_health or stores.health
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
        user_id: str = "",
        channel: str = "",
        mode: Mode | None = None,
        model: ChatModel | None = None,
        tools: ToolRegistry | None = None,
        persona: str = "",
        images: Sequence[str] = (),
        earlier: Earlier | None = None,
        prepare: Prepare | None = None,
        asking: Asking | None = None,
        voice: Heard | None = None,
    ) -> Run:
        """A running answer to ``question``. For this run only: ``mode`` overrides the
        settings' mode, ``model`` and ``tools`` the agent's own (a channel's choice),
        ``persona`` is added below the core instructions (``prompt.persona_section``), and
        ``images`` (``data:`` URLs) go with the question to a model that reads images, and
        ``earlier`` (the channel's earlier messages) goes before it as fenced data, recorded
        as the trace's first step (index 0: it is no model call). ``prepare`` runs first, in
        the run's own task (the files attached to the question, read): what it returns
        replaces ``tools`` and adds to ``images``, and a Stop (``cancel``) ends it at once,
        as it ends any step. ``asking``: who asks and where, for their memories (None: the
        run neither recalls nor changes any). ``voice``: the question was a voice note,
        heard so (the trace keeps it, and its cost)."""
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
            user_id=user_id,
            channel=channel,
            mode=chosen,
            persona=persona.strip()[: prompt.PERSONA_CHARS],
            voice=voice,
        )
        trace.system_prompt = self.settings.system_prompt
        if images:
            trace.notices.append(f"{len(images)} attached image(s) shown to the model")
        if earlier is not None and earlier.text:
            trace.steps.append(earlier.step(self._clock()))
        recalls = RunMemory(self.memories, asking, trace) if self.memories and asking else None
        run = Run(
            self, trace, refusal=problem, model=model, tools=tools, prepare=prepare, memory=recalls
        )
        run.images = list(images)
        run.earlier = earlier
        return run

    def run(
        self, question: str, *, conversation: str = "", user: str = "", mode: Mode | None = None
    ) -> AsyncIterator[Event]:
        """Convenience: start a run and iterate its events; closing the iterator early
        cancels the run (see ``Run.events``)."""
        return self.start(question, conversation=conversation, user=user, mode=mode).events()


TEXT_LATENCY = 0.025
"""Seconds streamed text may wait for the chunks after it before the run's consumer is woken:
less than a person notices or a platform's edit takes, and one wake for many chunks."""

READ_MESSAGES = "read_messages"
"""The action name of the trace's step 0: the earlier messages read before the first step."""


@dataclass(frozen=True, slots=True)
class Earlier:
    """Earlier messages of the asker's thread or channel, read by the surface before the run
    (``adapters.context``): ``text`` goes to the model as fenced data before the question,
    ``summary`` ("Read 14 earlier messages (Sam, Alex · 2,310 characters)") is what people see."""

    text: str
    summary: str

    def step(self, at: float) -> TraceStep:
        """The trace's first step, so every trace view shows what was read."""
        return TraceStep(
            index=0,
            action=READ_MESSAGES,
            action_input=self.summary,
            observation=self.text,
            started_at=at,
            ended_at=at,
        )


INTERNAL_ERROR = "Something went wrong inside reactbot (logged)."
EDIT_NOTE = "Note: a person edited the input before it ran; it ran as "
"""How the Observation of an action a person edited begins (then ``name[input].``)."""

_FINAL_EVENTS = (Finished, Failed, Cancelled)
"""As a tuple: ``isinstance`` with ``A | B | C`` builds the union anew for every event."""


Prepare = Callable[[Callable[[str], None]], Awaitable[tuple[ToolRegistry | None, Sequence[str]]]]
"""Work a run does before its first step (``Agent.start(prepare=...)``): the run's tools
(None: as chosen) and more images for the question. It is handed ``say``: each text it says
is the live status meanwhile (a ``reading`` Notice: "Reading the attached files")."""


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
        prepare: Prepare | None = None,
        memory: RunMemory | None = None,
    ) -> None:
        self.agent = agent
        self.trace = trace
        self._prepare = prepare
        self._recalls = memory
        self.model = model or agent.model
        self.answer_model = agent.answer_model if model is None else None
        """The default model's answer model; a run on its own model (a channel's or a
        question's pick) answers with that model, as chosen."""
        self.tools = self._with_memory(tools if tools is not None else agent.tools)
        self.images: list[str] = []
        self.earlier: Earlier | None = None
        """The channel's earlier messages, read for this question (not kept in history)."""
        """Sent with the question (not kept in the history: the next turn has its text)."""
        self._refusal = refusal
        """Why the question is refused before any model call (``Agent.question_problem``)."""
        self.settings = settings = agent.settings
        self._outbox = outbox = Outbox()
        self._reader = ReplyReader(
            outbox, trace, model_timeout=settings.model_timeout, prices=agent.prices
        )
        self._formats = formats_for(agent.json_formats, self._to_text)
        self._stopped_by: str | None = None
        self._stopped_by_id: str | None = None
        self._cancel_requested = False
        self._final: FinalEvent | None = None
        self._deadline: asyncio.Timeout | None = None
        self._probes = Probes(agent.observers, trace) if agent.observers else None
        self._tools = self._running(self.tools)
        self._memory = Memory(
            agent.history,
            trace,
            outbox.emit,
            compactor=agent.compactor,
            health=agent.memory_health,
            with_steps=settings.store_steps,
        )
        self._approvals = Approvals(
            trace=trace,
            tools=self.tools,
            outbox=outbox,
            approve=agent.approve,
            allowances=agent.allowances,
            listed=settings.approval_tools,
            timeout=settings.approval_timeout,
            show_within=settings.approval_show_within,
            remember=settings.approval_remember,
            clock=agent._clock,
            deadline=lambda: self._deadline,
            redecide=lambda n, step, action, call: self._decide(n, step, action, call=call),
        )
        self._task = asyncio.get_running_loop().create_task(self._main())
        self._task.add_done_callback(self._ensure_final)

    async def _prepared(self, prepare: Prepare) -> None:
        """What the run needs before its first step (its files, read), in its own task."""
        tools, images = await prepare(lambda text: self._emit(Notice("reading", text)))
        if images:
            self.trace.notices.append(f"{len(images)} attached image(s) shown to the model")
        if tools is not None:
            self.tools = self._approvals.tools = self._with_memory(tools)
            self._tools = self._running(self.tools)
        self.images.extend(images)

    def _with_memory(self, tools: ToolRegistry) -> ToolRegistry:
        return tools if self._recalls is None else self._recalls.tools(tools)

    def _running(self, tools: ToolRegistry) -> Tools:
        """What runs this run's actions from ``tools`` (timeouts, probes)."""
        return Tools(
            tools,
            timeout=self.settings.tool_timeout,
            clock=self.agent._clock,
            probes=self._probes,
        )

    @property
    def mode(self) -> Mode:
        mode = self.trace.mode
        return mode if mode in ("tools", "json") else "text"  # type: ignore[return-value]

    # ---- public -------------------------------------------------------------------------
    def cancel(self, by: str | None = None, *, by_id: str | None = None) -> None:
        """Stop the run (``by``: who, as people know them; ``by_id``: their platform id,
        when ``by`` is a display name). The first call wins, and once the outcome is
        decided (the final event exists) a late Stop changes nothing."""
        if not self._task.done() and not self._cancel_requested and self._final is None:
            self._cancel_requested = True
            self._stopped_by = by
            self._stopped_by_id = by_id
            self._task.cancel()

    async def events(self, *, text_latency: float = TEXT_LATENCY) -> AsyncIterator[Event]:
        """The run's events up to and including the final one. A consumer that stops early
        (breaks, is cancelled, closes the iterator) stops the run: nobody is listening.

        Streamed text reaches the consumer at most ``text_latency`` seconds after it arrived,
        as one event for all the chunks of that span (0: a wake for every chunk that finds
        the consumer waiting); every other event comes at once, in order."""
        outbox = self._outbox
        outbox.text_latency = text_latency
        pending, wait = outbox.pending, outbox.wait
        try:
            while True:
                while not pending:
                    await wait()
                event = pending.popleft()
                if type(event) is TextRun:
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
        self._outbox.emit(event)

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
        if self.earlier is not None and self.earlier.text:
            self._emit(Notice("info", self.earlier.summary))
        try:
            if self._prepare is not None:
                await self._prepared(self._prepare)
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
        trace.stopped_by_id = self._stopped_by_id
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

    def _say(self, text: str) -> None:
        self._emit(Notice("info", text))

    # ---- the loop -----------------------------------------------------------------------
    async def _loop(self) -> Finished:
        messages = prompt.build_messages(
            self.tools,
            await self._memory.load(),
            self.trace.question,
            mode=self.mode,
            persona=self.trace.persona,
            template=self.settings.system_prompt,
            earlier=self.earlier.text if self.earlier is not None else "",
            memories=await self._recalls.recall(self.agent._clock(), say=self._say)
            if self._recalls
            else "",
        )
        if self.images:
            messages[-1]["images"] = self.images
        state = _State(messages)
        for n in range(1, self.settings.max_steps + 1):
            reply = await self._step(n, state)
            if reply.refused:
                return await self._finish(reply.text, "refused", state)
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
        state.messages.append(self._format.best_answer(self.settings.max_steps))
        reply = await self._step(self.settings.max_steps + 1, state, kind="best_effort")
        if reply.refused:
            return await self._finish(reply.text, "refused", state)
        if reply.step is not None and reply.step.answer is not None:
            return await self._finish(reply.step.answer, "best_effort", state)
        text = reply.text if reply.step is None else (reply.step.thought or reply.text)
        return await self._finish(text, "best_effort", state)

    async def _rewrite_answer(self, n: int, draft: str, state: _State) -> Finished:
        """The larger answer model writes the final answer from the steps and the draft."""
        model = self.answer_model
        assert model is not None
        self.trace.models.append(model.name)
        state.messages.append(self._format.final_answer(draft))
        reply = await self._step(n, state, kind="answer", model=model)
        if reply.refused:
            return await self._finish(reply.text, "refused", state)
        if reply.step is not None and reply.step.answer:
            return await self._finish(reply.step.answer, "answered", state)
        return await self._finish(draft, "answered", state)  # the draft is still an answer

    async def _step(
        self, n: int, state: _State, *, kind: StepKind = "step", model: ChatModel | None = None
    ) -> Reply:
        """One model turn, re-asked up to ``format_retries`` times when the format is wrong."""
        model = model or self.model
        if self._probes is not None:
            model = WatchedModel(model, self._probes, n)
        self._emit(StepStarted(n, self.settings.max_steps, kind))
        for attempt in range(self.settings.format_retries + 1):
            step = self._open_step(n, "step" if kind == "step" else "final", model)
            reply = await self._call_model(n, step, state, model, final=kind != "step")
            step.ended_at = self.agent._clock()
            state.messages.append(assistant_message(reply))
            if reply.step is not None:
                step.thought = reply.step.thought or ""
                return reply
            step.kind, step.error = "format_error", reply.error
            if attempt == self.settings.format_retries:
                break
            reason = reply.error or "unreadable reply"
            self._emit(FormatRetry(n, attempt + 1, reason))
            state.messages.append(self._format.correction(reason))
        return Reply(reply.text, None, reply.error)

    def _open_step(self, n: int, kind: Literal["step", "final"], model: ChatModel) -> TraceStep:
        step = TraceStep(index=n, kind=kind, started_at=self.agent._clock(), model=model.name)
        self.trace.steps.append(step)
        return step

    async def _call_model(
        self, n: int, step: TraceStep, state: _State, model: ChatModel, *, final: bool
    ) -> Reply:
        """One request in the run's mode; ``final``: the answer is due, offer no tools."""
        request = Request(n, step, state.messages, model, self.tools, final)
        return await self._format.read(self._reader, request)

    @property
    def _format(self) -> StepFormat:
        return self._formats[self.mode]

    def _to_text(self, messages: list[Message]) -> None:
        """The endpoint takes no JSON format: the run goes on in text mode."""
        self.trace.mode = "text"
        messages[0] = {
            "role": "system",
            "content": prompt.system_prompt(
                self.tools, "text", self.trace.persona, self.settings.system_prompt
            ),
        }

    async def _act(self, n: int, action: Action, state: _State) -> None:
        step = self.trace.steps[-1]
        action = self._tools.text_action(action)
        self._decide(n, step, action)
        approved, outcome = await self._approvals.approved(n, step, action, step.thought)
        if outcome is None:
            outcome = await self._tools.run(approved, n, repeated=self._repeats(approved, state))
        state.last_actions = frozenset({(approved.name, approved.input)})
        self._record_observation(n, step, approved, outcome, state)

    async def _act_calls(self, n: int, calls: list[ToolCall], state: _State) -> None:
        """A reply's native tool calls: each an action of step ``n``, run concurrently (at
        most ``parallel_tools`` at once), answered in order by a ``tool`` message each."""
        first = self.trace.steps[-1]
        planned: list[tuple[TraceStep, Action, Outcome | None]] = []
        for k, call in enumerate(calls):
            step = first if k == 0 else self._call_step(first, k)
            step.call_id = call.id
            action, problem = self._tools.native_action(call)
            self._decide(n, step, action, call=k)
            planned.append((step, action, problem))
        approved: list[tuple[TraceStep, Action, Outcome | None]] = []
        for step, action, problem in planned:  # a person decides one action at a time
            if problem is None:
                action, problem = await self._approvals.approved(n, step, action, first.thought)
            approved.append((step, action, problem))
        limit = asyncio.Semaphore(max(1, self.settings.parallel_tools))

        async def run(step: TraceStep, action: Action, ready: Outcome | None) -> Outcome:
            if ready is not None:
                return ready
            async with limit:
                repeated = self._repeats(action, state)
                return await self._tools.run(action, n, repeated=repeated, call_id=step.call_id)

        outcomes = await asyncio.gather(*(run(s, a, ready) for s, a, ready in approved))
        state.last_actions = frozenset((a.name, a.input) for _, a, _ in approved)
        for (step, action, _), outcome in zip(approved, outcomes, strict=True):
            self._record_observation(n, step, action, outcome, state, call=step.call)

    @staticmethod
    def _repeats(action: Action, state: _State) -> bool:
        return (action.name, action.input) in state.last_actions

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

    def _decide(self, n: int, step: TraceStep, action: Action, *, call: int = 0) -> None:
        step.action, step.action_input = action.name, action.input
        display = display_of(self._tools.tools.get(action.name))
        self._emit(ActionDecided(n, action.name, action.input, call, display))

    def _record_observation(
        self,
        n: int,
        step: TraceStep,
        action: Action,
        outcome: Outcome,
        state: _State,
        *,
        call: int = 0,
    ) -> None:
        if step.approval is not None and step.approval.outcome == "edited" and not outcome.error:
            outcome.text = f"{EDIT_NOTE}{action.name}[{action.input}].\n" + outcome.text
        step.observation = outcome.text
        step.sources = list(outcome.sources)
        step.attachments = kept_attachments(
            self.trace, outcome.attachments, max_bytes=self.settings.attachment_max_bytes
        )
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

    def _for_model(self, text: str) -> str:
        return shorten(text, self.settings.observation_limit)  # the step keeps it whole

    async def _finish(self, answer: str, status: FinishedStatus, state: _State) -> Finished:
        answer = answer.strip()
        self.trace.answer, self.trace.status = answer, status
        self.trace.cited = cited_sources(answer, self.trace)
        await self._memory.remember()
        return Finished(self.trace, answer, status)


def kept_attachments(
    trace: Trace, attachments: Sequence[Attachment], *, max_bytes: int | None = None
) -> list[TraceAttachment]:
    """A tool's attachments as the trace keeps them: the bytes of each within ``max_bytes``
    (``files.max_bytes``) while the trace has room (``ATTACHMENT_BYTES_PER_TRACE``), else
    only what they were."""
    room = ATTACHMENT_BYTES_PER_TRACE - sum(
        len(a.data) for step in trace.steps for a in step.attachments if a.data is not None
    )
    kept = []
    for attachment in attachments:
        size = decoded_size(attachment.data)
        fits = len(attachment.data) <= room and (max_bytes is None or size <= max_bytes)
        data = attachment.data if fits else None
        room -= len(data or "")
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
